"""A run's raw statistics page and its live Elo page (reference 8).

`raw_statistics` and `live_elo` are plain functions of a `RunRecord` that
return what the templates print; the handlers load the run in the threadpool
and render. The live Elo page refreshes itself (10 s) until the SPRT decides,
the raw statistics (15 s) until the run finishes.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import NotFound
from arbiter.domain.runs.outcome import sprt_elo_of
from arbiter.stats.elo import (
    DistributionStats,
    fixed_games_elo,
    nelo_summary,
    raw_stats,
)
from arbiter.stats.llr import (
    llr_bayeselo,
    llr_logistic,
    llr_logistic_approx,
    llr_normalized,
    llr_normalized_approx,
)
from arbiter.stats.models import (
    BoundInModels,
    RmsBias,
    Spread,
    bounds_in_models,
    rms_bias,
    spread_of,
)
from arbiter.stats.sprt import SprtState, overshoot_corrections
from arbiter.stats.sprt_elo import SprtElo
from arbiter.storage.records import RunRecord
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui import run_format
from arbiter.web.ui.forms import run_id_of
from arbiter.web.ui.svg import Gauge, gauge

Rows = list[tuple[str, str]]
LIVE_DONE = 286


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    rows: Rows
    columns: tuple[str, ...] = ()  # a table instead: its heads, and a row's label and cells
    cells: tuple[tuple[str, tuple[str, ...]], ...] = ()
    note: str = ""


BOUND_COLUMNS = ("Logistic", "Normalized", "BayesElo", "Score")


def raw_statistics(run: RunRecord) -> list[Section]:
    """Every number of the raw-statistics page, grouped and formatted."""
    games = run.wins + run.losses + run.draws
    sections = [
        Section(
            "Results",
            [
                ("Games", f"{games:,}"),
                ("Wins / losses / draws", f"{run.wins} / {run.losses} / {run.draws}"),
                ("Pentanomial (LL, LD, DD+WL, WD, WW)", ", ".join(map(str, run.pentanomial))),
                ("Crashes / time losses", f"{run.crashes} / {run.time_losses}"),
            ],
        )
    ]
    if games == 0:
        return sections
    sprt = run.args.sprt
    spread = spread_of([run.losses, run.draws, run.wins], _penta(run))
    if sprt is not None:
        sections.append(_sprt_section(sprt))
        sections.append(_bounds_section(sprt, spread))
    stats = raw_stats(run.wins, run.losses, run.draws, _penta(run))
    sections.append(Section("Trinomial (per game)", _distribution(stats.trinomial)))
    if stats.pentanomial is not None:
        sections.append(Section("Pentanomial (per pair)", _distribution(stats.pentanomial)))
    derived = [
        ("Draw ratio", f"{stats.draw_ratio:.4f}"),
        ("DrawElo", _number(stats.drawelo)),
    ]
    derived += _elo_rows(run)  # the variance ratio is in the comparison below
    sections.append(Section("Derived", derived))
    bias = rms_bias(spread)
    if bias is not None:
        sections.append(_comparison_section(bias))
    if sprt is not None:
        sections.append(Section("Log-likelihood ratios", _llr_rows(run, sprt)))
    return sections


def _sprt_section(sprt: SprtState) -> Section:
    o0, o1 = overshoot_corrections(sprt)
    return Section(
        "SPRT",
        [
            ("Elo model", str(sprt["elo_model"])),
            ("elo0, elo1", f"{float(sprt['elo0']):g}, {float(sprt['elo1']):g}"),
            ("alpha, beta", f"{float(sprt['alpha']):g}, {float(sprt['beta']):g}"),
            ("Bounds A, B", f"{sprt['lower_bound']:.4f}, {sprt['upper_bound']:.4f}"),
            ("Overshoot corrections", f"{o0:.4f}, {o1:.4f}"),
            ("Batch size (pairs)", str(sprt["batch_size"])),
            ("LLR", f"{float(sprt['llr']):.4f}"),
            ("State", str(sprt.get("state") or "running")),
        ],
    )


def _bounds_section(sprt: SprtState, spread: Spread) -> Section:
    h0, h1 = bounds_in_models(
        str(sprt["elo_model"]), float(sprt["elo0"]), float(sprt["elo1"]), spread
    )
    cells = tuple((name, _bound_values(bound)) for name, bound in (("H0", h0), ("H1", h1)))
    note = (
        "Normalized Elo is logistic Elo over twice the standard deviation per game, "
        "from this run's own results: it is inversely proportional to the square root "
        "of the games needed to tell such a difference apart. With no draws and small "
        "differences the two coincide."
    )
    return Section("SPRT bounds in each model", [], BOUND_COLUMNS, cells, note)


def _bound_values(bound: BoundInModels) -> tuple[str, ...]:
    bayeselo = "–" if math.isnan(bound.bayeselo) else f"{bound.bayeselo:.3f}"
    return (f"{bound.logistic:.3f}", f"{bound.normalized:.3f}", bayeselo, f"{bound.score:.5f}")


def _comparison_section(bias: RmsBias) -> Section:
    return Section(
        "Pentanomial against trinomial",
        [
            ("Variance ratio (pentanomial / trinomial)", f"{bias.variance_ratio:.5f}"),
            ("Variance difference (trinomial − pentanomial)", f"{bias.variance_difference:.5f}"),
            ("RMS bias", f"{bias.bias:.5f}"),
            ("RMS bias (Elo)", f"{bias.elo:.3f}"),
        ],
        note="The RMS bias is the spread of the openings' biases that playing each "
        "opening with both colours takes out of the results.",
    )


def _distribution(dist: DistributionStats) -> Rows:
    return [
        ("Samples", f"{dist.samples:,.0f}"),
        ("Mean", _number(dist.mean)),
        ("Variance", _number(dist.variance)),
        ("Skewness", _number(dist.skewness)),
        ("Excess kurtosis", _number(dist.excess_kurtosis)),
    ]


def _elo_rows(run: RunRecord) -> Rows:
    rows: Rows = []
    try:
        estimate = fixed_games_elo(_penta(run) or [run.losses, run.draws, run.wins])
        rows.append(("Elo (logistic)", f"{estimate.elo:.2f} ± {estimate.elo95:.2f}"))
        rows.append(("LOS", f"{100 * estimate.los:.2f}%"))
    except (ValueError, ZeroDivisionError):
        pass
    try:
        summary = nelo_summary(run.pentanomial)
        rows.append(("nElo", f"{summary.nelo:.2f} ± {summary.nelo95:.2f}"))
        rows.append(("Pairs ratio", _number(summary.pairs_ratio)))
    except (ValueError, ZeroDivisionError):
        pass
    return rows


def _llr_rows(run: RunRecord, sprt: SprtState) -> Rows:
    elo0, elo1 = float(sprt["elo0"]), float(sprt["elo1"])
    penta = _penta(run) or [run.losses, run.draws, run.wins]
    ldw = [run.losses, run.draws, run.wins]
    candidates: list[tuple[str, Callable[[], float]]] = [
        ("Logistic, exact", lambda: llr_logistic(elo0, elo1, penta)),
        ("Logistic, approximation", lambda: llr_logistic_approx(elo0, elo1, penta)),
        ("Normalized, exact", lambda: llr_normalized(elo0, elo1, penta)),
        ("Normalized, approximation", lambda: llr_normalized_approx(elo0, elo1, penta)),
        ("BayesElo", lambda: llr_bayeselo(elo0, elo1, ldw)),
    ]
    rows: Rows = []
    for label, compute in candidates:
        try:
            rows.append((label, f"{compute():.4f}"))
        except (ValueError, ZeroDivisionError, OverflowError):
            rows.append((label, "–"))
    return rows


def _penta(run: RunRecord) -> list[int] | None:
    return list(run.pentanomial) if sum(run.pentanomial) > 0 else None


def _number(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.5g}"


# ---------------------------------------------------------------- live Elo


@dataclass(frozen=True, slots=True)
class LiveElo:
    gauges: list[Markup]
    rows: Rows
    decided: bool


def _about(run: RunRecord) -> Rows:
    """What a shared live Elo link says of the test: who, what, at which time control."""
    spec = run.args
    threads = spec.threads
    tc = f"{spec.tc}, {threads} thread{'s' if threads != 1 else ''}"
    message = spec.msg_new.strip().splitlines()
    return [
        ("Test", f"{spec.new_tag} vs {spec.base_tag}"),
        ("Submitted by", run.username),
        ("Time control", tc),
        ("Description", spec.info),
        ("Commit message", message[0] if message else ""),
    ]


def live_elo(run: RunRecord) -> LiveElo:
    """Three gauges (LOS, LLR within its bounds, Elo with its CI) and details."""
    sprt = run.args.sprt
    if sprt is None:
        return LiveElo([], [("Live Elo", "only for SPRT runs")], run.finished)
    lower, upper = float(sprt["lower_bound"]), float(sprt["upper_bound"])
    llr_value = float(sprt["llr"])
    llr_gauge = Gauge(
        "LLR",
        llr_value,
        lower,
        upper,
        f"{llr_value:.2f} ({lower:.2f}, {upper:.2f})",
        marks=[(lower, f"{lower:.2f}"), (0.0, "0"), (upper, f"{upper:.2f}")],
        id="gauge-llr",
    )
    estimate = _sprt_estimate(run, sprt)
    decided = bool(sprt.get("state")) or run.finished
    rows: Rows = [
        *_about(run),
        ("Games", f"{run.wins + run.losses + run.draws:,}"),
        ("W / L / D", f"{run.wins} / {run.losses} / {run.draws}"),
        ("Pentanomial", ", ".join(map(str, run.pentanomial))),
        ("Status", str(sprt.get("state") or run_format.status(run))),
    ]
    if estimate is None:
        return LiveElo([gauge(llr_gauge)], rows, decided)
    rows.append(("LOS", f"{100 * estimate.los:.1f}%"))
    elo0, elo1 = float(sprt["elo0"]), float(sprt["elo1"])
    span = math.ceil(max(4.0, abs(estimate.ci[0]), abs(estimate.ci[1]), abs(elo1) + 1))
    elo_gauge = Gauge(
        f"Elo ({sprt['elo_model']})",
        estimate.elo,
        -span,
        span,
        f"{estimate.elo:.2f} [{estimate.ci[0]:.2f}, {estimate.ci[1]:.2f}]",
        interval=estimate.ci,
        marks=[(-span, f"{-span:g}"), (elo0, ""), (elo1, ""), (span, f"{span:g}")],
        id="gauge-elo",
    )
    los_gauge = Gauge(
        "LOS",
        100 * estimate.los,
        0.0,
        100.0,
        f"{100 * estimate.los:.1f}%",
        marks=[(0.0, "0%"), (50.0, "50%"), (100.0, "100%")],
        id="gauge-los",
    )
    rows[:0] = [
        ("Elo", f"{estimate.elo:.2f} [{estimate.ci[0]:.2f}, {estimate.ci[1]:.2f}] (95%)"),
        ("SPRT bounds", f"⟨{elo0:g}, {elo1:g}⟩, the two inner marks of the Elo scale"),
    ]
    return LiveElo([gauge(los_gauge), gauge(llr_gauge), gauge(elo_gauge)], rows, decided)


def _sprt_estimate(run: RunRecord, sprt: SprtState) -> SprtElo | None:
    if run.wins + run.losses + run.draws == 0:
        return None
    return sprt_elo_of(run, sprt)


# ---------------------------------------------------------------- handlers


async def raw_stats_page(request: Request) -> Response:
    """Refreshed every 15 s while the run goes on (`?live=1`: the numbers only,
    LIVE_DONE once it has finished)."""
    run = await _load(request)
    sections = await run_in_threadpool(raw_statistics, run)
    context = {"run": run, "fmt": run_format, "sections": sections}
    if request.query_params.get("live"):
        status = LIVE_DONE if run.finished else 200
        return await render(request, "run_stats_live.html", context, status, fragment=True)
    return await render(request, "run_stats.html", context)


async def live_elo_page(request: Request) -> Response:
    run = await _load(request)
    live = await run_in_threadpool(live_elo, run)
    context = {"run": run, "fmt": run_format, "live": live}
    if request.query_params.get("live"):
        status = LIVE_DONE if live.decided else 200
        return await render(request, "live_elo_live.html", context, status, fragment=True)
    return await render(request, "live_elo.html", context)


async def _load(request: Request) -> RunRecord:
    run_id = run_id_of(request)
    try:
        return await run_in_threadpool(app_state(request).runs.queries.run, run_id)
    except NotFound:
        raise HTTPException(404, f"There is no run {run_id}.") from None
