@nightly @sim-only
Feature: A resume that cannot restore shows a readable state, one attempt, and the work in the files
  When the checkpoint fails, or the snapshot cannot be restored because the resume lands on
  a node with another GPU model, the workspace must say what happened in plain words, must
  not start competing attempts, and its owner must be able to recover the work from the files.

  Scenario: The checkpoint fails when the workspace is paused
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    And the simulator will make the checkpoint fail for this workspace
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace says in plain words that the checkpoint failed
    And at most one checkpoint was attempted
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And at most one restore attempt is in flight
    And the verdict is "FreshSession"
    And the files are unchanged
    And the work is recovered from the files and the application checkpoint

  Scenario: The GPU model changed between pause and resume
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    And the simulator will resume this workspace on a node with another GPU model
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace's PodSnapshot is Ready
    And at most one checkpoint was attempted
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And at most one restore attempt is in flight
    And the verdict is "FreshSession"
    And the files are unchanged
    And the work is recovered from the files and the application checkpoint
