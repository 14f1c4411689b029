"""What a submission reads from its commits: SHAs, messages, nets, bench, ancestry, diff.

`CodeReader.read` runs in a git thread (`work.GitWork`): it checks the URL
against the policy, lists the refs on the host, brings the two commits (and
the official master's head, when the server names an official repository)
into the repository's mirror, only as deep as the ancestry checks need, and
reads everything else from the mirror, locally. Every git call has a timeout.

A failure to reach the host is one message for every cause (refused, timed
out, not a repository, no such host), so a submission cannot tell an open
port from a closed one; git's own words go to the server's log only.
"""

import shlex
from dataclasses import dataclass

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.cache import Mirror, RepoCache
from arbiter.domain.repos.layout import (
    LAYOUT_FILE,
    MAX_LAYOUT_BYTES,
    STOCKFISH,
    EngineLayout,
    bench_of,
    net_names,
    parse_layout,
)
from arbiter.domain.repos.refs import Resolved, ls_remote, resolve_refs
from arbiter.domain.repos.runner import GitFailed, run_git
from arbiter.protocol.repo_policy import RepoPolicy, RepoRefused, Resolver, Target

OFFICIAL_MASTER_REF = "refs/arbiter/official-master"
MAX_COMMITS = 200
MAX_MESSAGE_BYTES = 64 * 1024


class CodeUnreadable(ValidationError):  # noqa: N818 - reads as what happened
    """The repository could not be read or was refused; `reason` is for the log."""

    def __init__(self, field: str, message: str, reason: str) -> None:
        super().__init__(field, message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class GitLimits:
    remote_seconds: float = 20.0  # one ls-remote or fetch
    local_seconds: float = 30.0  # one command on the mirror
    first_depth: int = 64  # commits fetched at first
    max_depth: int = 4096  # deepened, doubling, up to this
    diff_max_bytes: int = 512 * 1024


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    subject: str


@dataclass(frozen=True, slots=True)
class CodeFacts:
    resolved_base: str
    resolved_new: str
    msg_base: str
    msg_new: str
    base_bench: str | None
    new_bench: str | None
    master_bench: str | None  # set when the base is the official master's head
    base_nets: list[str]
    new_nets: list[str]
    commits: list[Commit]  # base..new, newest first
    warnings: list[str]
    diff: str
    diff_truncated: bool
    diff_command: str
    base_is_master: bool = False
    layout_declared: bool = False


class CodeReader:
    def __init__(
        self,
        policy: RepoPolicy,
        cache: RepoCache,
        *,
        official_repo: str = "",
        limits: GitLimits | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.policy = policy
        self.cache = cache
        self.official_repo = official_repo
        self.limits = limits or GitLimits()
        self._resolver = resolver

    def check(self, url: str, field_name: str = "tests_repo") -> Target:
        """The policy's Target for `url`, or CodeUnreadable naming the field."""
        try:
            return self.policy.check(url, self._resolver)
        except RepoRefused as refused:
            raise CodeUnreadable(field_name, f"{url}: {refused}", f"refused: {refused}") from None

    def read(self, repo_url: str, base_ref: str, new_ref: str) -> CodeFacts:
        """Everything submission needs from the two commits. [GIT thread]"""
        target = self.check(repo_url)
        fields = {base_ref: "base_tag", new_ref: "new_tag"}
        try:
            refs = resolve_refs(
                target, [base_ref, new_ref], fields, timeout=self.limits.remote_seconds
            )
            base, new = refs[base_ref], refs[new_ref]
            official = self._official()
            master = self._master_head(official) if official is not None else None
            with self.cache.using(repo_url) as mirror:
                self._bring(mirror, target, [base, new])
                if official is not None and master is not None:
                    master = self._bring_master(mirror, official, master)
                self._deepen(mirror, target, official, [base, new], master)
                return self._facts(mirror, target, (base_ref, new_ref), (base, new), master)
        except GitFailed as failed:
            raise unreadable(repo_url, failed) from None

    # --- the network: listing and fetching ---

    def _official(self) -> Target | None:
        if not self.official_repo:
            return None
        try:
            return self.policy.check(self.official_repo, self._resolver)
        except RepoRefused:
            return None  # the operator's setting: the checks against master are skipped

    def _master_head(self, official: Target) -> str | None:
        try:
            listing = ls_remote(official, ["refs/heads/master"], timeout=self.limits.remote_seconds)
        except GitFailed:
            return None  # master's checks are skipped, the submission goes on
        return listing.get("refs/heads/master")

    def _bring(self, mirror: Mirror, target: Target, wanted: list[Resolved]) -> None:
        """Fetch the commits the mirror lacks (a branch that moved is fetched again)."""
        missing = [item for item in wanted if not self._has(mirror, item.sha)]
        if not missing:
            return
        specs = [_refspec(item) for item in missing]
        self._fetch(mirror, target, specs, f"--depth={self.limits.first_depth}")
        for item in missing:
            if not self._has(mirror, item.sha):
                raise GitFailed(f"commit {item.sha} not found after the fetch")

    def _bring_master(self, mirror: Mirror, official: Target, head: str) -> str | None:
        if not self._has(mirror, head):
            spec = f"+refs/heads/master:{OFFICIAL_MASTER_REF}"
            try:
                self._fetch(mirror, official, [spec], f"--depth={self.limits.first_depth}")
            except GitFailed:
                return None
        if not self._has(mirror, head):
            return None
        self._local(mirror, ["update-ref", OFFICIAL_MASTER_REF, head])
        return head

    def _deepen(
        self,
        mirror: Mirror,
        target: Target,
        official: Target | None,
        wanted: list[Resolved],
        master: str | None,
    ) -> None:
        """Deepen the shallow history, doubling, until the ancestry checks can be
        answered (the commits meet) or `max_depth` is reached."""
        base, new = wanted
        depth = self.limits.first_depth
        while depth < self.limits.max_depth and self._shallow(mirror):
            connected = self._merge_base(mirror, base.sha, new.sha) is not None
            if master is not None:
                connected = connected and self._merge_base(mirror, new.sha, master) is not None
            if connected:
                return
            self._fetch(mirror, target, [_refspec(item) for item in wanted], f"--deepen={depth}")
            if master is not None and official is not None:
                spec = f"+refs/heads/master:{OFFICIAL_MASTER_REF}"
                self._fetch(mirror, official, [spec], f"--deepen={depth}")
            depth *= 2

    def _fetch(self, mirror: Mirror, target: Target, specs: list[str], depth: str) -> None:
        args = ["-C", str(mirror.path), "fetch", "--quiet", "--no-tags", depth]
        run_git(
            [*args, "--", target.url, *specs], timeout=self.limits.remote_seconds, target=target
        )

    # --- the mirror: local reads ---

    def _local(self, mirror: Mirror, args: list[str], max_output: int = MAX_MESSAGE_BYTES) -> str:
        output = run_git(
            ["-C", str(mirror.path), *args],
            timeout=self.limits.local_seconds,
            max_output=max_output,
        )
        return output.text

    def _has(self, mirror: Mirror, sha: str) -> bool:
        try:
            self._local(mirror, ["cat-file", "-e", f"{sha}^{{commit}}"])
        except GitFailed:
            return False
        return True

    def _shallow(self, mirror: Mirror) -> bool:
        return self._local(mirror, ["rev-parse", "--is-shallow-repository"]).strip() == "true"

    def _merge_base(self, mirror: Mirror, first: str, second: str) -> str | None:
        try:
            return self._local(mirror, ["merge-base", first, second]).strip() or None
        except GitFailed:
            return None  # no common ancestor (yet, in a shallow history)

    def _is_ancestor(self, mirror: Mirror, older: str, newer: str) -> bool:
        try:
            self._local(mirror, ["merge-base", "--is-ancestor", older, newer])
        except GitFailed:
            return False
        return True

    def _exists(self, mirror: Mirror, sha: str, path: str) -> bool:
        try:
            self._local(mirror, ["cat-file", "-e", f"{sha}:{path}"])
        except GitFailed:
            return False
        return True

    def _file(self, mirror: Mirror, sha: str, path: str, limit: int) -> str | None:
        if not self._exists(mirror, sha, path):
            return None
        return self._local(mirror, ["cat-file", "blob", f"{sha}:{path}"], max_output=limit)

    def _message(self, mirror: Mirror, sha: str) -> str:
        return self._local(mirror, ["log", "-1", "--format=%B", sha]).strip()

    def _layout(self, mirror: Mirror, sha: str, side: str) -> EngineLayout:
        declared = self._file(mirror, sha, LAYOUT_FILE, MAX_LAYOUT_BYTES)
        if declared is not None:
            return parse_layout(declared, side)
        if self._exists(mirror, sha, STOCKFISH.nets_file):
            return STOCKFISH
        return EngineLayout()  # an engine we know nothing of: no nets, the usual bench line

    def _nets(self, mirror: Mirror, sha: str, layout: EngineLayout) -> list[str]:
        if not layout.nets_file:
            return []
        source = self._file(mirror, sha, layout.nets_file, MAX_MESSAGE_BYTES * 4)
        return [] if source is None else net_names(layout, source)

    def _commits(self, mirror: Mirror, base: str, new: str) -> list[Commit]:
        text = self._local(
            mirror, ["log", f"-n{MAX_COMMITS}", "--format=%H%x1f%s", f"{base}..{new}"]
        )
        rows = (line.split("\x1f", 1) for line in text.splitlines() if "\x1f" in line)
        return [Commit(sha, subject) for sha, subject in rows]

    def _master_bench(self, mirror: Mirror, master: str, layout: EngineLayout) -> str | None:
        """The newest bench line on master (its head's, or the last commit's that has one)."""
        text = self._local(
            mirror, ["log", "-n50", "--format=%B%x1e", master], max_output=MAX_MESSAGE_BYTES * 8
        )
        for message in text.split("\x1e"):
            bench = bench_of(layout, message)
            if bench is not None:
                return bench
        return None

    def _facts(
        self,
        mirror: Mirror,
        target: Target,
        names: tuple[str, str],
        refs: tuple[Resolved, Resolved],
        master: str | None,
    ) -> CodeFacts:
        base, new = refs[0].sha, refs[1].sha
        base_layout, new_layout = (
            self._layout(mirror, base, "base"),
            self._layout(mirror, new, "new"),
        )
        msg_base, msg_new = self._message(mirror, base), self._message(mirror, new)
        base_is_master = master is not None and base == master
        diff = run_git(
            ["-C", str(mirror.path), "diff", "--no-color", "--no-ext-diff", base, new],
            timeout=self.limits.local_seconds,
            max_output=self.limits.diff_max_bytes,
        )
        return CodeFacts(
            resolved_base=base,
            resolved_new=new,
            msg_base=msg_base,
            msg_new=msg_new,
            base_bench=bench_of(base_layout, msg_base),
            new_bench=bench_of(new_layout, msg_new),
            master_bench=self._master_bench(mirror, base, base_layout) if base_is_master else None,
            base_nets=self._nets(mirror, base, base_layout),
            new_nets=self._nets(mirror, new, new_layout),
            commits=self._commits(mirror, base, new),
            warnings=self._warnings(mirror, base, new, master),
            diff=diff.text,
            diff_truncated=diff.truncated,
            diff_command=reproducing_command(target.url, names[1], base, new),
            base_is_master=base_is_master,
            layout_declared=new_layout.declared,
        )

    def _warnings(self, mirror: Mirror, base: str, new: str, master: str | None) -> list[str]:
        if base == new:
            return []  # one commit against itself (SPSA tunes so): no patch to place
        warnings = []
        if not self._is_ancestor(mirror, base, new):
            warnings.append("The base commit is not an ancestor of the new commit.")
        if master is not None:
            common = self._merge_base(mirror, new, master)
            if common is not None and common != base:
                warnings.append(
                    "The base is not the latest common ancestor of the new commit and"
                    f" master ({common[:10]}): the diff holds more than the patch."
                )
            if not self._is_ancestor(mirror, base, master):
                warnings.append("The base commit is not on the official master.")
        return warnings


def _refspec(item: Resolved) -> str:
    # Within the repository's own mirror, refs keep their names.
    return f"+{item.ref}:{item.ref}" if item.ref else item.sha


def reproducing_command(url: str, new_ref: str, base: str, new: str) -> str:
    """Shell commands that show the same diff in a clone of any repository."""
    return f"git fetch {shlex.quote(url)} {shlex.quote(new_ref)} && git diff {base} {new}"


def unreadable(repo_url: str, failed: GitFailed) -> CodeUnreadable:
    """One message for every way the host failed us (no port probing); git's words go to the log."""
    message = (
        f"cannot read the repository {repo_url}: it is unreachable, too slow, or not a"
        " git repository that lists these refs"
    )
    return CodeUnreadable("tests_repo", message, failed.reason)
