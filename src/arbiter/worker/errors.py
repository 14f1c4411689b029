"""The worker's exceptions. The class decides how a task is closed (reference 1.4).

- `WorkerError`: this task failed here (a build broke, a download failed);
  the worker posts `failed_task` and carries on after a back-off.
- `RunError`: the run itself is broken (wrong bench signature, an engine that
  plays illegal moves or lacks an option); the worker posts `stop_run`.
- `FatalError`: this machine cannot go on (too slow, a toolchain problem, a
  signal); the worker posts `failed_task` and exits.
- `CredentialsError`: the server refused the username or password; nothing
  to close, the worker exits with the server's message.
"""


class WorkerError(Exception):
    """A task failed on this machine; `failed_task` carries the message."""


class RunError(WorkerError):
    """The run is broken for every worker; `stop_run` carries the message."""


class FatalError(WorkerError):
    """The worker must stop after closing its task with `failed_task`."""


class UpdateError(WorkerError):
    """A self-update could not be made; the running worker carries on."""


class CredentialsError(Exception):
    """The server refused the credentials (or the account is blocked or pending)."""


class ConfigError(ValueError):
    """A configuration value or flag cannot be used; the message names it."""


__all__ = ["ConfigError", "CredentialsError", "FatalError", "RunError", "WorkerError"]
