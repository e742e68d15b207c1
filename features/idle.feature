@nightly @idle
Feature: An idle workspace is paused by its WorkspaceKind's activity rule, a busy one is not
  Kubeflow Workspaces pause a Workspace on their own once its Jupyter server has been idle for
  the secondsSinceActive of the first activityRule that matches it. A platform team relies on
  that to give idle GPUs back, and on it never pausing a notebook that is working.

  wsgate creates the Workspace with workspace.idle_pod_config, reads the rule that applies
  from the WorkspaceKind, and then only watches what the platform states in
  status.activity: lastActivity and rules.pauseWorkspace.eligibleAfter. While it waits it
  sends the Jupyter server no request, since every API request counts as activity.

  What counts as activity is jupyter_server's /api/status last_activity: API requests and
  messages a kernel sends. A kernel's busy state does not count, so a cell that computes in
  silence for longer than the threshold looks idle and is paused in the middle of its work.
  The busy scenario therefore runs a cell that prints its progress.

  A Jupyter server restored from a snapshot reports its pre-pause last_activity, so the first
  probe after a resume finds it long idle: a rule without minRunningSeconds pauses a restored
  workspace again before anyone can reconnect. The idle rule under test needs one.

  Scenario: An idle workspace is paused by its activity rule after the threshold, not before
    Given a GPU workspace whose podConfig has an idle pause rule is Running
    And the kernel has loaded the model, stored a marker in memory only and written its files
    When the kernel is left idle
    Then the platform pauses the workspace for inactivity within the "idle_pause" budget, not before it is eligible
    And the workspace is Paused within the "pause_to_paused" budget
    And the pause latency after eligibility is recorded
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And the verdict is "Restored"

  Scenario: A kernel busy with a long cell is not paused
    Given a GPU workspace whose podConfig has an idle pause rule is Running
    When the kernel runs a cell that prints progress for longer than the idle threshold plus two probe intervals
    Then the workspace was not paused while the cell ran
    And the workspace's last activity advanced while the cell ran
