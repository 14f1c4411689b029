"""Running git for the server: an argument list, a hard timeout, a bounded output.

Every git process runs in a session of its own, so a timeout kills its whole
process group (git-remote-https, ssh, upload-pack), not only git. Output goes
to temporary files and only the first `max_output` bytes are read back, so a
huge diff or a chatty remote costs disk for a moment, never memory. Prompts
are off (a password nobody types would hold the process), and the transports
git may use are those the `Target` allows (`protocol.allow`).

Blocking: call it from the git executor (`repos.work.GitWork`) or a test.
"""

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arbiter.protocol.repo_policy import Target

GIT = "git"
DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024


class GitFailed(Exception):  # noqa: N818
    """A git process failed or ran out of time. `reason` is for the server's log
    (git's own words); the message shown to a submitter is chosen by the caller,
    so it never tells an open port from a closed one."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True)
class GitOutput:
    stdout: bytes
    truncated: bool  # stdout was longer than max_output

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


def run_git(
    args: Sequence[str],
    *,
    timeout: float,
    target: Target | None = None,
    cwd: Path | None = None,
    max_output: int = DEFAULT_MAX_OUTPUT,
) -> GitOutput:
    """`git <target's -c options> <args>`; GitFailed on a non-zero exit or timeout."""
    config = target.git_config() if target is not None else ["-c", "protocol.allow=never"]
    command = [GIT, *config, *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with subprocess.Popen(  # noqa: S603 - argument list; URLs and refs are validated
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=_environment(target),
            start_new_session=True,
        ) as process:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                raise GitFailed(f"git {args[0]} took over {timeout:g} s", timed_out=True) from None
        if process.returncode != 0:
            err.seek(0)
            raise GitFailed(_reason(err.read(64 * 1024).decode("utf-8", errors="replace")))
        out.seek(0)
        data = out.read(max_output + 1)
    return GitOutput(data[:max_output], len(data) > max_output)


def _kill_group(process: "subprocess.Popen[bytes]") -> None:
    with contextlib.suppress(ProcessLookupError):  # it may just have ended
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _environment(target: Target | None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # Our -c options decide the transports; a GIT_ALLOW_PROTOCOL would override them.
        if key not in ("GIT_ALLOW_PROTOCOL", "GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_PARAMETERS")
    }
    env.update(
        GIT_TERMINAL_PROMPT="0",  # never ask for a user name or password
        GIT_ASKPASS="/bin/false",
        SSH_ASKPASS="/bin/false",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_SSH_COMMAND=target.ssh_command() if target is not None else "false",
        LC_ALL="C",  # git's messages, which we log, in English
    )
    return env


def _reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "git failed"
    # git's first "fatal:" line says what went wrong; the rest is advice.
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines)[0][:300]
