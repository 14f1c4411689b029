"""Resolving a run's branch and tag names to commit SHAs with `git ls-remote`.

Any git host works (no GitHub API). The URL and refs are validated by
`run_args` rules before they reach git, git is run with an argument list (no
shell), `--` ends its options, prompts are disabled and only the transports we
accept are allowed, so a hostile submission cannot make git run commands or
wait for a password.
"""

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence

from arbiter.domain.errors import DomainError, ValidationError
from arbiter.domain.run_args import check_ref, check_repo_url, is_full_sha, is_short_sha

GIT = "git"
_LINE = re.compile(r"(?P<sha>[0-9a-f]{40})\t(?P<ref>\S+)")


class GitError(DomainError):
    """The repository could not be read: unreachable, not a repository, too slow."""


def resolve_refs(
    repo_url: str,
    refs: Sequence[str],
    *,
    timeout: float = 20.0,
    fields: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Map each ref to the 40-hex SHA of the commit it names in `repo_url`.

    A full SHA is returned as is (ls-remote lists refs, not commits, so it
    cannot be checked here: the worker's fetch will). A branch wins over a tag
    of the same name; an annotated tag resolves to the commit it points to.
    `fields` maps a ref to the form field it came from (e.g. "new_tag"), for
    the ValidationError of an unknown ref; the default field is "ref".

    Blocking (a git process, network, up to `timeout` seconds): call it from
    the threadpool, never on the event loop. Raises GitError when the
    repository cannot be listed.
    """
    check_repo_url(repo_url)
    names = fields or {}
    for ref in refs:
        check_ref(ref, names.get(ref, "ref"))
    wanted = [ref for ref in dict.fromkeys(refs) if not is_full_sha(ref)]
    listing = _ls_remote(repo_url, wanted, timeout) if wanted else {}
    resolved: dict[str, str] = {}
    for ref in refs:
        if is_full_sha(ref):
            resolved[ref] = ref.lower()
            continue
        sha = _lookup(listing, ref)
        if sha is None:
            raise ValidationError(names.get(ref, "ref"), _not_found(repo_url, ref))
        resolved[ref] = sha
    return resolved


def _lookup(listing: Mapping[str, str], ref: str) -> str | None:
    if ref.startswith("refs/"):
        candidates = [f"{ref}^{{}}", ref]
    else:
        candidates = [f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"]
    for name in candidates:
        if name in listing:
            return listing[name]
    return None


def _not_found(repo_url: str, ref: str) -> str:
    if is_short_sha(ref):
        return (
            f"{ref!r} looks like an abbreviated commit SHA, which cannot be resolved "
            f"remotely: give the full 40-character SHA, a branch or a tag"
        )
    return f"no branch or tag named {ref!r} in {repo_url}"


def _ls_remote(repo_url: str, refs: Sequence[str], timeout: float) -> dict[str, str]:
    # Refs are passed as patterns so large repositories list only what we need;
    # a peeled tag (`v1^{}`) is only listed when asked for by its own pattern.
    patterns = [pattern for ref in refs for pattern in (ref, f"{ref}^{{}}")]
    command = [GIT, "ls-remote", "--", repo_url, *patterns]
    output = _run(command, timeout, repo_url)
    listing: dict[str, str] = {}
    for line in output.splitlines():
        match = _LINE.fullmatch(line)
        if match is not None:
            listing[match.group("ref")] = match.group("sha")
    return listing


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_TERMINAL_PROMPT="0",  # never ask for a user name or password
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        GIT_SSH_COMMAND="ssh -o BatchMode=yes",  # same for ssh URLs
        GIT_ALLOW_PROTOCOL="https:http:ssh:git:file",  # never ext:: and friends
        LC_ALL="C",  # error messages we pass on are English
    )
    return env


def _run(command: list[str], timeout: float, repo_url: str) -> str:
    # A session of its own, so a timeout kills git's helpers (ssh,
    # git-remote-https) too, not only git.
    with subprocess.Popen(  # noqa: S603 (argument list, validated URL and refs)
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may just have ended
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise GitError(
                f"the repository {repo_url} did not answer within {timeout:g} s"
            ) from None
    if process.returncode != 0:
        raise GitError(f"cannot read the repository {repo_url}: {_reason(err)}")
    return out


def _reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "git ls-remote failed"
    # git's first "fatal:" line says what went wrong; the rest is advice.
    fatal = [line for line in lines if line.startswith("fatal:")]
    reason = (fatal or lines)[0].removeprefix("fatal:").strip()
    return reason[:300]
