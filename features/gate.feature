@gate @gpu
Feature: Release gate: a paused workspace across a platform upgrade
  Before an upgrade, `wsgate gate prepare` pauses a workspace with a marker in kernel memory
  and writes a state file; after it, `wsgate gate verify` resumes from that file alone. These
  scenarios run both halves in one suite, handing off through the state file the same way.

  Scenario: The gate passes when the paused workspace comes back restored
    When the release gate is prepared
    Then the gate's state file holds no secret
    When the release gate is verified from its state file
    Then the gate verdict is "Restored"

  Scenario: An upgrade that invalidates the snapshot is reported, with the work recoverable
    When the release gate is prepared
    And the prepared workspace's snapshots are deleted, as an upgrade that invalidates them would
    And the release gate is verified from its state file
    Then the gate verdict is "SnapshotInvalidated"
