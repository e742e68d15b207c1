@nightly
Feature: A resume that cold-starts is reported as a fresh session, never as a restore
  When no snapshot can be restored the workspace still comes back with its files, but the
  process is new. wsgate must say so, and show that the work can be recovered from the files.

  Scenario: The snapshot is deleted before the resume
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    When the workspace's snapshots are deleted
    And the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And the verdict is "FreshSession"
    And the work is recovered from the files and the application checkpoint
    And the recovery time is recorded beside the restore time

  Scenario: A workspace kind without snapshots
    Given a GPU workspace of kind "jupyterlab" is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And the verdict is "FreshSession"
    And the work is recovered from the files and the application checkpoint
