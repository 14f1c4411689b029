"""The run page's view of the code a run tests: commit subjects, ancestry
warnings (for approvers and the run's owner), the diff as classed lines for
highlighting, the command that reproduces it, and the forge's own link.

Pure functions of the stored `CodeView` (domain/runs/code_view.py): the page
never runs git.
"""

from dataclasses import dataclass

from arbiter.domain.accounts import User
from arbiter.domain.runs.code_view import CodeView
from arbiter.storage.records import RunRecord
from arbiter.web.ui.run_format import commit_url, diff_url

MAX_SHOWN_LINES = 5000  # beyond it the page says so and the command shows the rest


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # file, hunk, add, del, ctx: a CSS class
    text: str


@dataclass(frozen=True, slots=True)
class CommitRow:
    sha: str
    subject: str
    url: str | None


@dataclass(frozen=True, slots=True)
class CodeSection:
    commits: list[CommitRow]
    warnings: list[str]  # empty unless the viewer approves or owns the run
    lines: list[DiffLine]
    files: int
    truncated: bool  # the stored diff or the lines shown were cut
    command: str
    forge_url: str | None


def code_section(view: CodeView | None, run: RunRecord, user: User | None) -> CodeSection | None:
    if view is None:
        return None
    repo = run.args.tests_repo
    commits = [CommitRow(c["sha"], c["subject"], commit_url(repo, c["sha"])) for c in view.commits]
    sees_warnings = user is not None and (user.is_approver or user.username == run.username)
    lines = [DiffLine(_kind(line), line) for line in view.diff.splitlines()]
    return CodeSection(
        commits=commits,
        warnings=list(view.warnings) if sees_warnings else [],
        lines=lines[:MAX_SHOWN_LINES],
        files=sum(line.kind == "file" for line in lines),
        truncated=view.diff_truncated or len(lines) > MAX_SHOWN_LINES,
        command=view.diff_command,
        forge_url=diff_url(run),
    )


def _kind(line: str) -> str:
    if line.startswith("diff --git "):
        return "file"
    if line.startswith(("--- ", "+++ ", "index ", "new file", "deleted file", "similarity")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "ctx"
