"""What a submission takes from its commits into the run, and the checks on it.

`code_args` turns `CodeFacts` (repos/reading.py) into the run's arguments:
the commit messages (`msg_base`, `msg_new`), the nets each side names
(`base_nets`, `new_nets`), an empty bench signature filled from the commit's
`Bench:` line (a base that is the official master must use master's bench),
and the new commit's message as the default description. `require_nets`
refuses a net the server does not hold; `mark_nets_tested` records each net's
first and last test and whether master uses it, in the run's transaction.
"""

import atexit
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from arbiter.domain.errors import DomainError, ValidationError
from arbiter.domain.repos.cache import RepoCache
from arbiter.domain.repos.reading import CodeFacts, CodeReader, CodeUnreadable
from arbiter.domain.repos.work import GitWork
from arbiter.domain.run_args import MAX_INFO_CHARS, RunArgs
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow
from arbiter.storage import Tx
from arbiter.storage.records import RunRecord

log = logging.getLogger("arbiter.submissions")


@dataclass(frozen=True, slots=True)
class CodeSource:
    """The reader of commits and the bounded executor it runs in."""

    reader: CodeReader
    work: GitWork


def local_code_source(cache_dir: Path | None = None) -> CodeSource:
    """For tools and tests on local repositories: file:// and loopback allowed,
    a small cache in `cache_dir` (by default one per process in the temporary
    directory)."""
    policy = RepoPolicy(parse_allow("file, 127.0.0.0/8, ::1/128, localhost"))
    # One cache per process, made only when a repository is first read, and
    # removed when the process ends (each test process would leave one behind).
    if cache_dir is None:
        cache_dir = Path(tempfile.gettempdir()) / f"arbiter-git-cache-{os.getpid()}"
        atexit.register(shutil.rmtree, cache_dir, ignore_errors=True)
    root = cache_dir
    cache = RepoCache(root, max_bytes=512 * 1024 * 1024)
    return CodeSource(CodeReader(policy, cache), GitWork(threads=8, per_account=8, retry_after=5))


def code_args(args: RunArgs, facts: CodeFacts) -> dict[str, Any]:
    """The run arguments read from the commits (ValidationError: a bench that
    contradicts the official master's)."""
    base_signature = args.base_signature or facts.base_bench or ""
    if facts.master_bench is not None:
        if args.base_signature and args.base_signature != facts.master_bench:
            raise ValidationError(
                "base_signature",
                f"the base is the official master, whose bench is {facts.master_bench}",
            )
        base_signature = facts.master_bench
    info = args.info or facts.msg_new[:MAX_INFO_CHARS]
    return {
        "msg_base": facts.msg_base,
        "msg_new": facts.msg_new,
        "base_nets": list(facts.base_nets),
        "new_nets": list(facts.new_nets),
        "base_signature": base_signature,
        "new_signature": args.new_signature or facts.new_bench or "",
        "info": info,
    }


def require_nets(tx: Tx, facts: CodeFacts) -> None:
    """ValidationError naming the first net the server does not hold."""
    for field, names in (("new_tag", facts.new_nets), ("base_tag", facts.base_nets)):
        for name in names:
            if tx.nets.get(name) is None:
                raise ValidationError(
                    field,
                    f"the net {name} is not on this server: upload it on the nets page"
                    " (/upload) before submitting",
                )


def mark_nets_tested(tx: Tx, run: RunRecord, facts: CodeFacts) -> None:
    test = {"run_id": run.id, "username": run.username, "time": run.start_time}
    for name in dict.fromkeys([*facts.base_nets, *facts.new_nets]):
        master = facts.base_is_master and name in facts.base_nets
        tx.nets.mark_tested(name, test, master=master)


def log_refusal(username: str, repo_url: str, error: BaseException) -> None:
    """One line per refused or failed submission: who, which host, why."""
    reason = error.reason if isinstance(error, CodeUnreadable) else str(error)
    if isinstance(error, ValidationError) and not isinstance(error, CodeUnreadable):
        reason = f"{error.field}: {reason}"
    level = logging.INFO if isinstance(error, DomainError) else logging.WARNING
    log.log(
        level,
        "submission refused: user=%s host=%s reason=%s",
        username,
        repo_host(repo_url),
        reason.replace("\n", " ")[:300],
    )


def repo_host(repo_url: str) -> str:
    if "://" not in repo_url:
        return repo_url.partition("@")[2].partition(":")[0] or "-"
    try:
        return urlsplit(repo_url).hostname or repo_url.split("://", 1)[0]
    except ValueError:
        return "-"
