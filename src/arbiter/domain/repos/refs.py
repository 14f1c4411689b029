"""Branch and tag names to commit SHAs, with `git ls-remote` on a checked Target.

Any git host works (no forge API). A branch wins over a tag of the same name;
an annotated tag resolves to the commit it points to; a full SHA is its own
answer (ls-remote lists refs, not commits: the fetch checks it).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.git_names import check_ref, is_full_sha, is_short_sha
from arbiter.domain.repos.runner import run_git
from arbiter.protocol.repo_policy import Target

_LINE = re.compile(r"(?P<sha>[0-9a-f]{40})\t(?P<ref>\S+)")


@dataclass(frozen=True, slots=True)
class Resolved:
    sha: str
    ref: str  # the full ref name it was listed under ("refs/heads/x"), "" for a SHA


def resolve_refs(
    target: Target, refs: Sequence[str], fields: Mapping[str, str], *, timeout: float
) -> dict[str, Resolved]:
    """Map each ref to its commit; ValidationError (on the ref's field) for an unknown
    one, GitFailed when the repository cannot be listed."""
    for ref in refs:
        check_ref(ref, fields.get(ref, "ref"))
    wanted = [ref for ref in dict.fromkeys(refs) if not is_full_sha(ref)]
    listing = ls_remote(target, wanted, timeout=timeout) if wanted else {}
    resolved: dict[str, Resolved] = {}
    for ref in refs:
        if is_full_sha(ref):
            resolved[ref] = Resolved(ref.lower(), "")
            continue
        found = lookup(listing, ref)
        if found is None:
            raise ValidationError(fields.get(ref, "ref"), _not_found(target.url, ref))
        resolved[ref] = found
    return resolved


def ls_remote(target: Target, refs: Sequence[str], *, timeout: float) -> dict[str, str]:
    # Refs are passed as patterns so large repositories list only what we need;
    # a peeled tag (`v1^{}`) is only listed when asked for by its own pattern.
    patterns = [pattern for ref in refs for pattern in (ref, f"{ref}^{{}}")]
    output = run_git(["ls-remote", "--", target.url, *patterns], timeout=timeout, target=target)
    listing: dict[str, str] = {}
    for line in output.text.splitlines():
        match = _LINE.fullmatch(line)
        if match is not None:
            listing[match.group("ref")] = match.group("sha")
    return listing


def lookup(listing: Mapping[str, str], ref: str) -> Resolved | None:
    if ref.startswith("refs/"):
        candidates = [f"{ref}^{{}}", ref]
    else:
        candidates = [f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"]
    for name in candidates:
        if name in listing:
            return Resolved(listing[name], name.removesuffix("^{}"))
    return None


def _not_found(repo_url: str, ref: str) -> str:
    if is_short_sha(ref):
        return (
            f"{ref!r} looks like an abbreviated commit SHA, which cannot be resolved "
            f"remotely: give the full 40-character SHA, a branch or a tag"
        )
    return f"no branch or tag named {ref!r} in {repo_url}"
