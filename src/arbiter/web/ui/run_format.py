"""How a run reads on a page: title, status, result lines, argument rows.

Plain functions of a `RunRecord`; templates call them, so a page never
computes statistics itself. Runs in the threadpool with the rendering.
"""

from typing import Any

from arbiter.domain.runs.outcome import games_of
from arbiter.stats.elo import fixed_games_elo
from arbiter.storage.records import RunRecord

ARG_ROWS = (
    ("tests_repo", "Repository"),
    ("new_tag", "New"),
    ("base_tag", "Base"),
    ("resolved_new", "New SHA"),
    ("resolved_base", "Base SHA"),
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
    return "SPRT" if "sprt" in run.args else "SPSA" if "spsa" in run.args else "games"


def title(run: RunRecord) -> str:
    args = run.args
    if "sprt" in args:
        return f"SPRT {args['new_tag']} vs {args['base_tag']}"
    if "spsa" in args:
        return f"SPSA {args['new_tag']}"
    return f"{args['num_games']} games - {args['new_tag']} vs {args['base_tag']}"


def status(run: RunRecord) -> str:
    if run.deleted:
        return "deleted"
    if run.failed:
        return "failed"
    if run.finished:
        return "finished"
    if not run.approved:
        return "pending"
    return "active" if run.workers > 0 else "paused"


def colour(run: RunRecord) -> str:
    return "green" if run.is_green else "yellow" if run.is_yellow else ""


def result_lines(run: RunRecord) -> list[str]:
    """The result box, as the reference prints it, one line each."""
    lines: list[str] = []
    sprt = run.args.get("sprt")
    if sprt is not None:
        lines.append(
            f"LLR: {sprt['llr']:.2f} ({sprt['lower_bound']:.2f}, {sprt['upper_bound']:.2f})"
            f" [{float(sprt['elo0']):.2f}, {float(sprt['elo1']):.2f}] {sprt['elo_model']}"
        )
    elif "spsa" in run.args:
        spsa = run.args["spsa"]
        lines.append(f"Iteration {spsa['iter']} of {spsa['num_iter']}")
    estimate = elo_line(run)
    if estimate:
        lines.append(estimate)
    lines.append(f"Games: {games_of(run)} W: {run.wins} L: {run.losses} D: {run.draws}")
    lines.append("Ptnml(0-2): " + ", ".join(str(count) for count in run.pentanomial))
    return lines


def elo_line(run: RunRecord) -> str:
    if sum(run.pentanomial) < 2:
        return ""
    try:
        estimate = fixed_games_elo(run.pentanomial)
    except (ValueError, ZeroDivisionError):
        return ""
    return f"Elo: {estimate.elo:.2f} ± {estimate.elo95:.1f} (95%) LOS: {100 * estimate.los:.1f}%"


def progress(run: RunRecord) -> str:
    return f"{games_of(run)} / {run.args['num_games']}"


def arg_rows(run: RunRecord) -> list[tuple[str, Any]]:
    rows = [
        (label, run.args[key]) for key, label in ARG_ROWS if run.args.get(key) not in ("", None)
    ]
    if "sprt" in run.args:
        sprt = run.args["sprt"]
        rows.append(
            ("SPRT", f"elo0={sprt['elo0']} elo1={sprt['elo1']} batch {sprt['batch_size']} pairs")
        )
    return rows
