"""What the run page shows of a run's code, kept as read at submission.

One document per run in the key/value store (`code/<run id>`), written in the
submission's transaction: the commits between base and new, the ancestry
warnings, the diff (size-capped) and the command that reproduces it. The page
never runs git: the mirror may be evicted, the host gone.
"""

from dataclasses import dataclass
from typing import Any

from arbiter.domain.repos.reading import CodeFacts
from arbiter.storage import Tx


@dataclass(frozen=True, slots=True)
class CodeView:
    commits: list[dict[str, str]]  # {sha, subject}, newest first
    warnings: list[str]
    diff: str
    diff_truncated: bool
    diff_command: str


def _key(run_id: str) -> str:
    return f"code/{run_id}"


def save(tx: Tx, run_id: str, facts: CodeFacts) -> None:
    tx.kv.set(
        _key(run_id),
        {
            "commits": [{"sha": c.sha, "subject": c.subject} for c in facts.commits],
            "warnings": list(facts.warnings),
            "diff": facts.diff,
            "diff_truncated": facts.diff_truncated,
            "diff_command": facts.diff_command,
        },
    )


def load(tx: Tx, run_id: str) -> CodeView | None:
    stored: Any = tx.kv.get(_key(run_id))
    if not isinstance(stored, dict):
        return None  # a run submitted before the code was read
    return CodeView(
        commits=list(stored.get("commits", [])),
        warnings=list(stored.get("warnings", [])),
        diff=str(stored.get("diff", "")),
        diff_truncated=bool(stored.get("diff_truncated", False)),
        diff_command=str(stored.get("diff_command", "")),
    )
