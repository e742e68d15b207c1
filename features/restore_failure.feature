@nightly @sim-only
Feature: A pause or a resume that cannot use a snapshot says so, and the work survives in the files
  The GKE Workspaces snapshot add-on's pause has no failure path: when the checkpoint fails
  the workspace stays Checkpointing with its pod running and its GPU held until it is deleted
  (gke-labs/workspaces reconcile.go). wsgate must say so at once, naming the trigger's
  condition, rather than wait out the pause budget. When the snapshot cannot be restored
  because the resume lands on a node with another GPU model, the resume cold-starts: one
  attempt, and the work is recovered from the files. (A snapshot deleted before the resume:
  fresh_session.feature.)

  Scenario: The checkpoint fails when the workspace is paused
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    And the simulator will make the checkpoint fail for this workspace
    When the workspace is paused
    Then the pause fails because the checkpoint failed
    And at most one checkpoint was attempted

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
