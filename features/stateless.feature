@nightly @stateless
Feature: A paused VS Code workspace keeps its files, settings and extensions
  GKE Workspaces' stateless kind (`codeserver`, VS Code in code-server) is not snapshot-enabled:
  a pause deletes the pod and a resume starts a new one. Its promise is that everything on the
  home volume comes back (the files, the editor's settings, its extensions) and that the paused
  workspace has no pod, so none of its CPU, memory or GPU is held. No process is expected to
  survive.

  Scenario: A paused VS Code workspace comes back with its files, settings and extensions
    Given a VS Code workspace of kind "codeserver" with image "codeserver-python-cpu" and pod option "small_cpu" is Running
    And code-server answers on its port
    And a file, the editor settings and an extension are written through exec
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    And the workspace has no pod
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And code-server answers on its port
    And the files verdict is "FilesKept"

  Scenario: A settings file removed before the pause is reported lost after the resume
    Given a VS Code workspace of kind "codeserver" with image "codeserver-python-cpu" and pod option "small_cpu" is Running
    And code-server answers on its port
    And a file, the editor settings and an extension are written through exec
    And the written "settings" file is deleted through exec
    When the workspace is paused
    Then the workspace is Paused within the "pause_to_paused" budget
    When the workspace is resumed
    Then the workspace is Running within the "resume_to_running" budget
    And the files verdict is "FilesLost" naming "settings"
