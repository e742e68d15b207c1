@nightly
Feature: Snapshots are cleaned up
  A snapshot holds the whole memory of a GPU notebook; one left behind costs storage.

  # Every cell is made 300 ms slower here (in the kernel process only, so a restored process
  # keeps it): the report's resume -> next cell must then be 300 ms after resume -> kernel.
  Scenario: After a successful resume the workspace's snapshots are gone
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    And every cell the kernel runs takes 300 ms longer
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace's PodSnapshot is Ready
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And the verdict is "Restored"
    And the next cell completes at least 300 ms after the kernel answered
    And the workspace's PodSnapshots are gone within the "snapshot_cleanup" budget
    And the snapshots' objects in the bucket are gone where the target lists them

  Scenario: Deleting a paused workspace removes its snapshots
    Given a snapshot-enabled GPU workspace is Running
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace's PodSnapshot is Ready
    When the workspace is deleted
    Then the workspace's PodSnapshots are gone within the "snapshot_cleanup" budget
    And the snapshots' objects in the bucket are gone where the target lists them

  # Simulator only: the add-on gives every policy lastAccessTimeout 7d; on a real cluster
  # the retention step refuses with "not applicable on a real cluster".
  @sim-only
  Scenario: Retention expiry removes an old snapshot
    Given a snapshot-enabled GPU workspace is Running
    And the simulator expires this workspace's snapshots "5s" after their last access
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace's PodSnapshot is Ready
    And the workspace's PodSnapshots are gone within the "snapshot_cleanup" budget
    And the snapshots' objects in the bucket are gone where the target lists them

  # Simulator only: the fault stands in for a GKE service agent without storage permission.
  @sim-only
  Scenario: A snapshot stuck in Deleting is reported with the storage-permission hint
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    And the simulator will leave this workspace's snapshots stuck in Deleting
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace's PodSnapshot is Ready
    When the workspace is deleted
    Then the workspace's PodSnapshots are reported stuck in Deleting after the "snapshot_stuck" budget
