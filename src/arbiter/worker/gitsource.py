"""Engine sources from any git URL, by commit SHA (no GitHub API).

One bare mirror per repository URL keeps what was fetched, so later tasks
of the same repository fetch only new commits. A commit is exported with
`git archive` into a fresh directory. git runs with an argument list (no
shell), `--` before URLs and refs, no prompts, and only the transports the
server accepts for `tests_repo`. Blocking: the task's thread.
"""

import hashlib
import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

from arbiter.worker.errors import WorkerError

GIT = "git"
FETCH_SECONDS = 600.0
LOCAL_SECONDS = 120.0
_SHA = re.compile(r"[0-9a-f]{40}")
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # never wait for a password nobody will type
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",  # not ext::, which runs commands
    "GIT_CONFIG_NOSYSTEM": "1",
}


class GitError(WorkerError):
    """The commit could not be fetched or exported."""


def export_commit(repo_url: str, sha: str, mirrors: Path, destination: Path) -> None:
    """Write the tree of commit `sha` of `repo_url` into `destination` (created)."""
    if not _SHA.fullmatch(sha):
        raise GitError(f"{sha!r} is not a full commit SHA")
    mirror = mirror_path(mirrors, repo_url)
    if not mirror.exists():
        mirrors.mkdir(parents=True, exist_ok=True)
        _git(["init", "--quiet", "--bare", str(mirror)], LOCAL_SECONDS)
    if not _has_commit(mirror, sha):
        _fetch(mirror, repo_url, sha)
    archive = _git(["-C", str(mirror), "archive", "--format=tar", sha], LOCAL_SECONDS)
    destination.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")  # no absolute paths, no escapes


def mirror_path(mirrors: Path, repo_url: str) -> Path:
    return mirrors / (hashlib.sha256(repo_url.encode()).hexdigest()[:16] + ".git")


def _fetch(mirror: Path, repo_url: str, sha: str) -> None:
    """By SHA first (cheap, and what most hosts allow), else every branch and tag."""
    try:
        _git(["-C", str(mirror), "fetch", "--quiet", "--", repo_url, sha], FETCH_SECONDS)
    except GitError:
        refs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
        _git(["-C", str(mirror), "fetch", "--quiet", "--", repo_url, *refs], FETCH_SECONDS)
    if not _has_commit(mirror, sha):
        raise GitError(f"commit {sha} is not in {repo_url}")


def _has_commit(mirror: Path, sha: str) -> bool:
    try:
        _git(["-C", str(mirror), "cat-file", "-e", f"{sha}^{{commit}}"], LOCAL_SECONDS)
    except GitError:
        return False
    return True


def _git(args: list[str], timeout: float) -> bytes:
    try:
        done = subprocess.run(  # noqa: S603 - git with an argument list, validated inputs
            [GIT, *args],
            capture_output=True,
            timeout=timeout,
            env={**os.environ, **GIT_ENV},
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
