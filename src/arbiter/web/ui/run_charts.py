"""The run page's charts: LLR against games with the SPRT bounds, the Elo
estimate with its 95% interval against games, and SPSA parameters over
iterations. Plain functions of a `RunRecord`, rendered with the page (threadpool).

LLR and Elo points come from the run's results history
(`domain.runs.history`); SPSA points from the run's `param_history`.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from arbiter.domain.runs import history
from arbiter.stats.elo import fixed_games_elo
from arbiter.stats.sprt import SprtState
from arbiter.stats.spsa import SpsaState, history_period
from arbiter.storage.records import RunRecord
from arbiter.web.ui.svg import Band, Chart, Rule, Series, line_chart

MAX_SPSA_LINES = 12  # more lines than this are unreadable; the table lists them all
SPSA_LABELS = {
    "start": ("SPSA parameters: distance from start in units of c_end", "(θ − start) / c_end"),
    "values": ("SPSA parameters: values", "θ"),
    "c": ("SPSA parameters: distance from start in % of c", "(θ − start) / c (%)"),
}
MIN_PAIRS_FOR_ELO = 2


@dataclass(frozen=True, slots=True)
class SpsaView:
    """How the SPSA chart shows its parameters: `scale` "start" (distance from the
    start in units of c_end), "values" (θ itself) or "c" (distance from the start
    as a share of that iteration's c, the reference's "% of c"); `smoothing` 0
    (the samples) to MAX_SMOOTHING, a Gaussian kernel's width in percent of the
    run, as the reference's chart smooths."""

    scale: str = "start"
    smoothing: int = 0


SPSA_SCALE_NAMES = {"start": "from start, in c_end", "values": "values", "c": "from start, % of c"}
SPSA_SCALES = tuple(SPSA_SCALE_NAMES)
MAX_SMOOTHING = 10


def spsa_view(params: Mapping[str, str]) -> SpsaView:
    """The chart's view from the query string (bad values: the default)."""
    scale = params.get("spsa_view", "")
    smoothing = params.get("spsa_smooth", "")
    return SpsaView(
        scale if scale in SPSA_SCALES else "start",
        int(smoothing) if smoothing.isdigit() and int(smoothing) <= MAX_SMOOTHING else 0,
    )


def charts(run: RunRecord, view: SpsaView | None = None) -> list[Markup]:
    """Every chart that applies to the run, in page order."""
    found: list[Markup] = []
    sprt, spsa = run.args.sprt, run.args.spsa
    if sprt is not None:
        found.append(llr_chart(run, sprt))
    if spsa is not None:
        found.append(spsa_chart(spsa, view or SpsaView()))
    else:
        found.append(elo_chart(run))
    return found


def llr_chart(run: RunRecord, sprt: SprtState) -> Markup:
    points = [(0.0, 0.0)] + [
        (float(p.games), p.llr) for p in history.points(run) if p.llr is not None
    ]
    lower, upper = float(sprt["lower_bound"]), float(sprt["upper_bound"])
    chart = Chart(
        title="Log-likelihood ratio against games",
        x_label="games",
        y_label="LLR",
        series=[Series("LLR", points if len(points) > 1 else [], "s0")],
        rules=[
            Rule(upper, f"accept {upper:.2f}", "rule accept"),
            Rule(lower, f"reject {lower:.2f}", "rule reject"),
            Rule(0.0, "", "rule zero"),
        ],
        id="llr-chart",
    )
    return line_chart(chart)


def elo_chart(run: RunRecord) -> Markup:
    centre, low, high = [], [], []
    for point in history.points(run):
        if sum(point.pentanomial) < MIN_PAIRS_FOR_ELO:
            continue
        try:
            estimate = fixed_games_elo(point.pentanomial)
        except (ValueError, ZeroDivisionError):
            continue
        games = float(point.games)
        centre.append((games, estimate.elo))
        low.append((games, estimate.ci[0]))
        high.append((games, estimate.ci[1]))
    chart = Chart(
        title="Elo estimate with its 95% confidence interval against games",
        x_label="games",
        y_label="Elo",
        series=[Series("Elo", centre, "s0")],
        bands=[Band(low, high)] if len(centre) > 1 else [],
        rules=[Rule(0.0, "0", "rule zero")],
        id="elo-chart",
    )
    return line_chart(chart)


def spsa_chart(spsa: SpsaState, view: SpsaView) -> Markup:
    """Each parameter over the iterations, in the scale the view asks for."""
    params = spsa["params"]
    samples = spsa.get("param_history") or []
    period = history_period(int(spsa["num_iter"]), len(params))
    series = []
    for index, param in enumerate(params[:MAX_SPSA_LINES]):
        first_c = float(param.get("c") or param["c_end"])  # c at the first iteration
        rows = [(0.0, float(param["start"]), first_c)]
        for number, sample in enumerate(samples, start=1):
            at = sample[index]
            rows.append((number * period, float(at["theta"]), float(at.get("c") or first_c)))
        if int(spsa["iter"]) > (rows[-1][0] if samples else 0):
            rows.append((float(spsa["iter"]), float(param["theta"]), float(param["c_end"])))
        points = _scaled(rows, param, view, int(spsa["num_iter"]))
        series.append(
            Series(str(param["name"]), points if len(points) > 1 else [], f"s{index % 8}")
        )
    hidden = len(params) - len(series)
    title, y_label = SPSA_LABELS[view.scale]
    if view.smoothing:
        title += f", smoothed ({view.smoothing})"
    chart = Chart(
        title=title,
        x_label="iterations (game pairs)",
        y_label=y_label,
        series=series,
        rules=[] if view.scale == "values" else [Rule(0.0, "start", "rule zero")],
        legend=len(series) <= 6,
        id="spsa-chart",
        hover_points=True,
    )
    if hidden <= 0:
        return line_chart(chart)
    note = Markup('<p class="muted">{} more parameters are in the table below.</p>').format(hidden)
    return line_chart(chart) + note


def _scaled(
    rows: list[tuple[float, float, float]],
    param: Mapping[str, Any],
    view: SpsaView,
    num_iter: int,
) -> list[tuple[float, float]]:
    """(iteration, value) of one parameter: θ smoothed first (the samples are of
    θ), then put in the view's scale."""
    bandwidth = _bandwidth(rows, view.smoothing, num_iter)
    thetas = _smoothed([theta for _, theta, _ in rows], bandwidth)
    start, c_end = float(param["start"]), float(param["c_end"])
    points = []
    for (iteration, _, c), theta in zip(rows, thetas, strict=True):
        if view.scale == "values":
            points.append((iteration, theta))
        elif view.scale == "c":
            points.append((iteration, 100.0 * (theta - start) / c if c else 0.0))
        else:
            points.append((iteration, (theta - start) / c_end))
    return points


def _bandwidth(rows: list[tuple[float, float, float]], smoothing: int, num_iter: int) -> float:
    """The kernel's width in samples, as the reference's chart sets it: twice
    `smoothing` percent of the run's planned iterations."""
    if smoothing == 0 or len(rows) < 2 or rows[-1][0] <= 0 or num_iter <= 0:
        return 0.0
    done = rows[-1][0] / num_iter  # the share of the run the samples cover
    return 2.0 * smoothing * (len(rows) - 1) / (done * 100.0)


def _smoothed(values: list[float], bandwidth: float) -> list[float]:
    """Gaussian kernel regression of equally spaced samples (a hundred or so)."""
    if not bandwidth:
        return values
    smoothed = []
    for i in range(len(values)):
        weights = [math.exp(-0.5 * ((i - j) / bandwidth) ** 2) for j in range(len(values))]
        smoothed.append(sum(w * v for w, v in zip(weights, values, strict=True)) / sum(weights))
    return smoothed
