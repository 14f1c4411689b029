"""The run page's charts: LLR against games with the SPRT bounds, the Elo
estimate with its 95% interval against games, and SPSA parameters over
iterations. Plain functions of a `RunRecord`, rendered with the page (threadpool).

LLR and Elo points come from the run's results history
(`domain.runs.history`); SPSA points from the run's `param_history`.
"""

from markupsafe import Markup

from arbiter.domain.runs import history
from arbiter.stats.elo import fixed_games_elo
from arbiter.stats.spsa import history_period
from arbiter.storage.records import RunRecord
from arbiter.web.ui.svg import Band, Chart, Rule, Series, line_chart

MAX_SPSA_LINES = 12  # more lines than this are unreadable; the table lists them all
MIN_PAIRS_FOR_ELO = 2


def charts(run: RunRecord) -> list[Markup]:
    """Every chart that applies to the run, in page order."""
    found: list[Markup] = []
    if "sprt" in run.args:
        found.append(llr_chart(run))
    if "spsa" in run.args:
        found.append(spsa_chart(run))
    else:
        found.append(elo_chart(run))
    return found


def llr_chart(run: RunRecord) -> Markup:
    sprt = run.args["sprt"]
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


def spsa_chart(run: RunRecord) -> Markup:
    """Each parameter's distance from its start, in units of its final step c_end,
    so parameters of any size share one readable scale."""
    spsa = run.args["spsa"]
    params = spsa["params"]
    samples = spsa.get("param_history") or []
    period = history_period(int(spsa["num_iter"]), len(params))
    series = []
    for index, param in enumerate(params[:MAX_SPSA_LINES]):
        start, c_end = float(param["start"]), float(param["c_end"])
        points = [(0.0, 0.0)]
        for number, sample in enumerate(samples, start=1):
            points.append((number * period, (float(sample[index]["theta"]) - start) / c_end))
        if int(spsa["iter"]) > (points[-1][0] if samples else 0):
            points.append((float(spsa["iter"]), (float(param["theta"]) - start) / c_end))
        series.append(
            Series(str(param["name"]), points if len(points) > 1 else [], f"s{index % 8}")
        )
    hidden = len(params) - len(series)
    chart = Chart(
        title="SPSA parameters: distance from start in units of c_end",
        x_label="iterations (game pairs)",
        y_label="(θ − start) / c_end",
        series=series,
        rules=[Rule(0.0, "start", "rule zero")],
        legend=len(series) <= 6,
        id="spsa-chart",
        hover_points=True,
    )
    if hidden <= 0:
        return line_chart(chart)
    note = Markup('<p class="muted">{} more parameters are in the table below.</p>').format(hidden)
    return line_chart(chart) + note
