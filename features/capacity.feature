@nightly @drill @serial
Feature: Resuming while GPUs are scarce waits visibly and loses nothing
  In a capacity crunch a resume must show a clear "waiting for resources" state, never start
  competing restore attempts, and keep the snapshot until the GPU comes back.

  Scenario: A resume under a GPU squeeze waits, then restores once the squeeze is lifted
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    When the GPUs are squeezed
    And the workspace is resumed
    Then the workspace shows a waiting state within the "waiting_state" budget
    And at most one restore attempt is in flight
    And the workspace's PodSnapshot is still Ready
    When the squeeze is lifted
    Then the workspace is Running within the "resume_to_running" budget
    And at most one restore attempt is in flight
    And the verdict is "Restored"
