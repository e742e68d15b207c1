@nightly
Feature: Snapshots are cleaned up
  A snapshot holds the whole memory of a GPU notebook; one left behind costs storage.

  Scenario: After a successful resume the workspace's snapshots are gone
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace's PodSnapshot is Ready
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And the verdict is "Restored"
    And the workspace's PodSnapshots are gone within the "snapshot_cleanup" budget
