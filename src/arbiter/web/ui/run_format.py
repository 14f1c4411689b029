"""How a run reads on a page: title, status, result lines, argument rows.

Plain functions of a `RunRecord`; templates call them, so a page never
computes statistics itself. Runs in the threadpool with the rendering.
"""

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup

from arbiter.domain.runs.documents import hash_mib
from arbiter.domain.runs.lifecycle import allowed_actions
from arbiter.domain.runs.outcome import elo_counts, games_of, pentanomial_of
from arbiter.domain.runs.spsa_steps import params_of, schedule_of
from arbiter.stats.elo import EloEstimate, fixed_games_elo, nelo_summary
from arbiter.stats.spsa import gains
from arbiter.storage.records import RunRecord

LTC_SECONDS = 40.0  # a time control from 40 s on counts as long (as /api/finished_runs)

ARG_ROWS = (
    ("tests_repo", "Repository"),
    ("new_tag", "New"),
    ("base_tag", "Base"),
    ("resolved_new", "New SHA"),
    ("resolved_base", "Base SHA"),
    ("new_nets", "New nets"),
    ("base_nets", "Base nets"),
    ("tc", "Time control"),
    ("new_tc", "New time control"),
    ("threads", "Threads"),
    ("book", "Book"),
    ("book_depth", "Book depth"),
    ("new_options", "New options"),
    ("base_options", "Base options"),
    ("num_games", "Games"),
    ("priority", "Priority"),
    ("throughput", "Throughput %"),
    ("itp", "Internal throughput"),
    ("arch_filter", "Arch filter"),
    ("compiler", "Compiler"),
    ("adjudication", "Adjudication"),
    ("auto_purge", "Auto purge"),
    ("info", "Info"),
)


def kind(run: RunRecord) -> str:
    return "SPRT" if run.args.sprt is not None else "SPSA" if run.args.spsa is not None else "games"


def title(run: RunRecord) -> str:
    spec = run.args
    if spec.sprt is not None:
        return f"SPRT {spec.new_tag} vs {spec.base_tag}"
    if spec.spsa is not None:
        return f"SPSA {spec.new_tag}"
    return f"{spec.num_games} games - {spec.new_tag} vs {spec.base_tag}"


def status(run: RunRecord) -> str:
    """pending, waiting (approved, no worker has taken a task yet), active,
    paused (approved, had workers, has none now), finished, failed, deleted."""
    if run.deleted:
        return "deleted"
    if run.failed:
        return "failed"
    if run.finished:
        return "finished"
    if not run.approved:
        return "pending"
    if run.workers > 0:
        return "active"
    return "waiting" if run.total_games == 0 else "paused"


def colour(run: RunRecord) -> str:
    return "green" if run.is_green else "yellow" if run.is_yellow else ""


def result_colour(run: RunRecord) -> str:
    """The result cell's colour, by the reference's rules: a rejected test is
    yellow when the new engine won more games than it lost, else red; an
    accepted one green, or blue for a non-regression SPRT (elo0 + elo1 < 0).
    An SPRT's verdict is its state (a test stopped before deciding has none:
    uncoloured); a fixed-games test's is its LOS (under 5% rejected, over 95%
    accepted); SPSA runs are never coloured."""
    if run.args.spsa is not None:
        return ""
    verdict = _verdict(run)
    if verdict == "rejected":
        return "yellow" if run.wins > run.losses else "red"
    if verdict == "accepted":
        sprt = run.args.sprt
        regression = sprt is not None and float(sprt["elo0"]) + float(sprt["elo1"]) < 0.0
        return "blue" if regression else "green"
    return ""


def _verdict(run: RunRecord) -> str:
    sprt = run.args.sprt
    if sprt is not None:
        return str(sprt.get("state") or "")
    estimate = _fixed_games_estimate(run)
    if estimate is None:
        return ""
    return "rejected" if estimate.los < 0.05 else "accepted" if estimate.los > 0.95 else ""


DESCRIPTION_CHARS = 160


def description(run: RunRecord) -> str:
    """The run's description (`info`) on one line, cut for a table row."""
    text = " ".join(run.args.info.split())
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 1] + "…"


def may_approve(user: Any, run: RunRecord, self_approval: bool) -> bool:
    """Whether the row's approve button works for `user` (the lifecycle decides)."""
    return "approve" in allowed_actions(user, run, self_approval=self_approval)


def result_lines(run: RunRecord) -> list[str]:
    """The result box, as the reference prints it, one line each."""
    lines: list[str] = []
    sprt = run.args.sprt
    if sprt is not None:
        lines.append(
            f"LLR: {sprt['llr']:.2f} ({sprt['lower_bound']:.2f}, {sprt['upper_bound']:.2f})"
            f" [{float(sprt['elo0']):.2f}, {float(sprt['elo1']):.2f}] {sprt['elo_model']}"
        )
    elif run.args.spsa is not None:
        spsa = run.args.spsa
        lines.append(f"Iteration {spsa['iter']} of {spsa['num_iter']}")
    estimate = elo_line(run)
    if estimate:
        lines.append(estimate)
    if kind(run) == "games":
        normalized = nelo_line(run)
        if normalized:
            lines.append(normalized)
    lines.append(f"Games: {games_of(run)} W: {run.wins} L: {run.losses} D: {run.draws}")
    if pentanomial_of(run) is not None:  # none for a run from before pairs were counted
        lines.append("Ptnml(0-2): " + ", ".join(str(count) for count in run.pentanomial))
    return lines


def _fixed_games_estimate(run: RunRecord) -> EloEstimate | None:
    """Elo, its 95% interval and LOS of the run's games; None with too few."""
    counts = elo_counts(run)  # [L, D, W] for a run imported from before pairs were counted
    if sum(counts) < 2:
        return None
    try:
        return fixed_games_elo(counts)
    except (ValueError, ZeroDivisionError):
        return None


def elo_line(run: RunRecord) -> str:
    estimate = _fixed_games_estimate(run)
    if estimate is None:
        return ""
    return f"Elo: {estimate.elo:.2f} ± {estimate.elo95:.1f} (95%) LOS: {100 * estimate.los:.1f}%"


def nelo_line(run: RunRecord) -> str:
    """The fixed-games nElo line: nElo ± 95% and the pairs ratio."""
    if sum(run.pentanomial) < 2:
        return ""
    try:
        summary = nelo_summary(run.pentanomial)
    except (ValueError, ZeroDivisionError):
        return ""
    return (
        f"nElo: {summary.nelo:.2f} ± {summary.nelo95:.1f} (95%)"
        f" PairsRatio: {summary.pairs_ratio:.2f}"
    )


def _shown(key: str, value: Any) -> Any:
    """An argument as the table shows it: the internal throughput, a ratio the
    scheduler computes, to two decimals (97.39, not 97.39070270270271); a list
    (the nets) as its items."""
    if key == "itp" and isinstance(value, float | int):
        return f"{value:.2f}"
    return ", ".join(str(item) for item in value) if isinstance(value, list) else value


def same_signatures(run: RunRecord) -> bool:
    """Base and new bench the same (the reference's note); SPSA runs, which
    tune one commit, are left out."""
    base, new = run.args.base_signature, run.args.new_signature
    return run.args.spsa is None and bool(base) and base == new


def progress(run: RunRecord) -> str:
    return f"{games_of(run)} / {run.args.num_games}"


def arg_rows(run: RunRecord) -> list[tuple[str, Any]]:
    rows = [
        (label, _shown(key, value))
        for key, label in ARG_ROWS
        if (value := getattr(run.args, key)) not in ("", None, [])
    ]
    if run.args.sprt is not None:
        sprt = run.args.sprt
        rows.append(
            ("SPRT", f"elo0={sprt['elo0']} elo1={sprt['elo1']} batch {sprt['batch_size']} pairs")
        )
    return rows


# Hosts whose web pages show a commit at <repo>/commit/<sha> (GitLab: /-/commit/).
COMMIT_PAGES = {
    "github.com": "{repo}/commit/{sha}",
    "codeberg.org": "{repo}/commit/{sha}",
    "gitlab.com": "{repo}/-/commit/{sha}",
}
DIFF_PAGES = {
    "github.com": "{repo}/compare/{base}...{new}",
    "codeberg.org": "{repo}/compare/{base}...{new}",
    "gitlab.com": "{repo}/-/compare/{base}...{new}",
}
# The Hash (MiB) the reference expects for a time control and thread count.
EXPECTED_HASH = {
    ("10+0.1", 1): 16,
    ("60+0.6", 1): 64,
    ("5+0.05", 8): 64,
    ("20+0.2", 8): 256,
    ("180+1.8", 1): 192,
    ("60+0.6", 8): 512,
}


def _web_repo(repo: str) -> tuple[str, str] | None:
    """(host, https URL without .git) of a repository on a known host, else None."""
    try:
        parts = urlsplit(repo)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" or host not in COMMIT_PAGES:
        return None
    path = parts.path.rstrip("/").removesuffix(".git")
    return host, f"https://{host}{path}"


def commit_url(repo: str, sha: str) -> str | None:
    web = _web_repo(repo)
    return None if web is None else COMMIT_PAGES[web[0]].format(repo=web[1], sha=sha)


def diff_url(run: RunRecord) -> str | None:
    web = _web_repo(run.args.tests_repo)
    if web is None:
        return None
    base, new = run.args.resolved_base, run.args.resolved_new
    return DIFF_PAGES[web[0]].format(repo=web[1], base=base, new=new)


def arg_cell(run: RunRecord, label: str, value: Any) -> Markup:
    """A value of the argument table, linked to its commit on a known host."""
    repo = run.args.tests_repo
    if label in ("New SHA", "Base SHA"):
        url = commit_url(repo, str(value))
        if url is not None:
            return Markup('<a href="{}"><code>{}</code></a>').format(url, value)
        return Markup("<code>{}</code>").format(value)
    if label == "New":
        url = diff_url(run)
        if url is not None:
            return Markup('{} <a href="{}">(diff)</a>').format(value, url)
    return Markup("{}").format(value)


def warnings(run: RunRecord) -> list[str]:
    """The reference's run-page warnings that apply to this run."""
    spec = run.args
    found = []
    if spec.throughput > 100:
        found.append(f"Throughput is {spec.throughput:g}% (above the usual 100%).")
    if spec.priority > 0:
        found.append(f"Priority is {spec.priority:g} (above the usual 0).")
    if spec.base_options != spec.new_options:
        found.append("The two engines get different UCI options.")
    if spec.new_tc and spec.new_tc != spec.tc:
        found.append(f"Time odds: the test engine plays at {spec.new_tc}.")
    expected = EXPECTED_HASH.get((spec.tc, spec.threads))
    hashes = {hash_mib(options) for options in (spec.new_options, spec.base_options)}
    if expected is not None and hashes != {expected}:
        found.append(
            f"Unusual Hash for {spec.tc} with {spec.threads} thread(s): {expected} expected."
        )
    if spec.arch_filter:
        found.append(f"Only workers whose arch matches {spec.arch_filter!r} play this run.")
    if spec.compiler:
        found.append(f"Only workers compiling with {spec.compiler} play this run.")
    if run.failures:
        found.append(f"This run failed {run.failures} time(s).")
    return found


def residual_text(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.2f}"


def total(found: Any) -> str:
    """A finished list's total: "12,345", or "1,000+" where it was counted up to a bound."""
    return f"{found.total:,}" if found.total_exact else f"{found.total:,}+"


def queue_hours(overview: Any) -> str:
    """The home page's queue estimate: hours of work for the fleet as it is now."""
    hours = overview.queue_hours
    if hours is None:
        return f"{overview.queued_cpu_hours:,.0f} CPU h"
    return f"{hours:,.1f} h"


def filter_tags(run: RunRecord) -> str:
    """Space-separated tags the home page's type filters match rows on."""
    length = "ltc" if run.tc_base >= LTC_SECONDS else "stc"
    threads = "smp" if run.args.threads > 1 else "st"
    return f"{kind(run).lower()} {length} {threads}"


@dataclass(frozen=True, slots=True)
class SpsaRow:
    """A tuned parameter as the run page lists it, with the gains the next
    iteration uses: c_k (the perturbation) and R_k (the learning rate)."""

    name: str
    theta: float
    start: float
    min: float
    max: float
    c_end: float
    r_end: float
    c_k: float
    r_k: float


def spsa_rows(run: RunRecord) -> list[SpsaRow]:
    spsa = run.args.spsa
    if spsa is None:
        return []
    schedule, k = schedule_of(spsa), int(spsa["iter"])
    rows = []
    for param in params_of(spsa):
        c_k, r_k = gains(param, k, schedule)
        rows.append(
            SpsaRow(
                param.name,
                param.theta,
                param.start,
                param.min,
                param.max,
                param.c_end,
                param.r_end,
                c_k,
                r_k,
            )
        )
    return rows
