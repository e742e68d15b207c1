@drill @slow @serial
Feature: Capacity-contention drill: paused workspaces resume at once on fewer GPUs
  When more paused workspaces resume at the same moment than there are GPUs, each one waits
  its turn visibly, restores from its own snapshot, and never starts competing attempts.
  `wsgate drill --workspaces N --gpus M` runs the same drill at scale.

  Scenario Outline: <workspaces> paused workspaces resume at the same moment on <gpus> GPUs
    When a drill resumes <workspaces> paused workspaces at once on <gpus> GPUs, <sample> of them kernel-checked
    Then every workspace ends Restored: <sample> by kernel evidence, the others PlatformRestored
    And no workspace had more than one restore attempt at a time
    And some workspaces waited for a GPU, and the waits are reported as p50, p95 and max

    Examples:
      | workspaces | gpus | sample |
      | 3          | 1    | 1      |
      | 4          | 2    | 0      |
