@nightly @gate @gpu @serial
Feature: Pausing a GPU notebook frees the GPU, and resuming brings back the running process
  A platform team turns on pause for GPU notebooks only if resume brings back the kernel
  process (model in memory, variables in RAM), not just a fresh session over the same files.

  Scenario: A paused GPU workspace resumes with its process, model and files
    Given a snapshot-enabled GPU workspace is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace has no pod
    And the GPU is free again within the "gpu_release" budget
    And a probe pod asking for the same accelerator gets scheduled
    And the workspace's PodSnapshot is Ready
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And at most one restore attempt is in flight
    And the verdict is "Restored"
    And the files are unchanged
    And a cell using the loaded model runs without reloading it
    And the phases from resume request to next cell are recorded
