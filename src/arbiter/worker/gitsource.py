"""Engine sources from any git URL, by commit SHA (no GitHub API).

One bare mirror per repository URL keeps what was fetched, so later tasks
of the same repository fetch only new commits. A commit is exported with
`git archive` into a fresh directory. git runs with an argument list (no
shell), `--` before URLs and refs, and no prompts. Before any fetch the URL
passes the same policy as on the server (`protocol/repo_policy.py`) with the
worker's own allow list (ARBITER_WORKER_GIT_ALLOW, ARBITER_WORKER_GIT_SSH):
public https only by default, git pinned to the checked addresses and
redirects off, so a run cannot point volunteers' machines at their local
networks. Blocking: the task's thread.
"""

import hashlib
import io
import os
import re
import subprocess
import tarfile
from collections.abc import Mapping
from pathlib import Path

from arbiter.protocol.repo_policy import RepoPolicy, RepoRefused, Target, parse_allow
from arbiter.worker.errors import ConfigError, WorkerError

GIT = "git"
FETCH_SECONDS = 600.0
LOCAL_SECONDS = 120.0
_SHA = re.compile(r"[0-9a-f]{40}")
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # never wait for a password nobody will type
    "GIT_CONFIG_NOSYSTEM": "1",
}
ALLOW_VARIABLE = "ARBITER_WORKER_GIT_ALLOW"
SSH_VARIABLE = "ARBITER_WORKER_GIT_SSH"


def policy_from_env(environ: Mapping[str, str]) -> RepoPolicy:
    """The worker's repository policy from its environment (ConfigError if unreadable)."""
    try:
        allow = parse_allow(environ.get(ALLOW_VARIABLE, ""), ALLOW_VARIABLE)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    ssh = environ.get(SSH_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")
    return RepoPolicy(allow, ssh=ssh, allow_setting=ALLOW_VARIABLE)


class GitError(WorkerError):
    """The commit could not be fetched or exported."""


def export_commit(
    repo_url: str, sha: str, mirrors: Path, destination: Path, policy: RepoPolicy
) -> None:
    """Write the tree of commit `sha` of `repo_url` into `destination` (created)."""
    if not _SHA.fullmatch(sha):
        raise GitError(f"{sha!r} is not a full commit SHA")
    mirror = mirror_path(mirrors, repo_url)
    if not mirror.exists():
        mirrors.mkdir(parents=True, exist_ok=True)
        _git(["init", "--quiet", "--bare", str(mirror)], LOCAL_SECONDS)
    if not _has_commit(mirror, sha):
        try:
            target = policy.check(repo_url)
        except RepoRefused as refused:
            raise GitError(f"this worker does not fetch {repo_url}: {refused}") from None
        _fetch(mirror, target, sha)
    archive = _git(["-C", str(mirror), "archive", "--format=tar", sha], LOCAL_SECONDS)
    destination.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")  # no absolute paths, no escapes


def mirror_path(mirrors: Path, repo_url: str) -> Path:
    return mirrors / (hashlib.sha256(repo_url.encode()).hexdigest()[:16] + ".git")


def _fetch(mirror: Path, target: Target, sha: str) -> None:
    """By SHA first (cheap, and what most hosts allow), else every branch and tag."""
    fetch = [*target.git_config(), "-C", str(mirror), "fetch", "--quiet", "--", target.url]
    env = {"GIT_SSH_COMMAND": target.ssh_command()}
    try:
        _git([*fetch, sha], FETCH_SECONDS, env)
    except GitError:
        refs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
        _git([*fetch, *refs], FETCH_SECONDS, env)
    if not _has_commit(mirror, sha):
        raise GitError(f"commit {sha} is not in {target.url}")


def _has_commit(mirror: Path, sha: str) -> bool:
    try:
        _git(["-C", str(mirror), "cat-file", "-e", f"{sha}^{{commit}}"], LOCAL_SECONDS)
    except GitError:
        return False
    return True


def _git(args: list[str], timeout: float, env: Mapping[str, str] | None = None) -> bytes:
    # Only the transports a target allows (`-c protocol.*` in its config); a
    # GIT_ALLOW_PROTOCOL of the environment would override them.
    base = {k: v for k, v in os.environ.items() if k != "GIT_ALLOW_PROTOCOL"}
    try:
        done = subprocess.run(  # noqa: S603 - git with an argument list, validated inputs
            [GIT, "-c", "protocol.allow=never", *args],
            capture_output=True,
            timeout=timeout,
            env={**base, **GIT_ENV, **(env or {})},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitError(
            f"git {args[2] if len(args) > 2 else args[0]} took over {timeout:.0f} s"
        ) from None
    except OSError as error:
        raise GitError(f"cannot run git: {error}") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()[-1000:]
        raise GitError(f"git failed: {message or f'exit {done.returncode}'}")
    return done.stdout
