"""Server-drawn SVG charts: scales, escaping, and the run page's three charts."""

import re

from arbiter.domain.runs import history
from arbiter.domain.runs.documents import new_run_record
from arbiter.storage.records import RunRecord, evolve
from arbiter.storage.run_spec import spec_of
from arbiter.web.ui import run_charts
from arbiter.web.ui.svg import Chart, Gauge, Rule, Series, gauge, line_chart, nice_ticks, tick_text
from tests.domain.runs.support import T0


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 448) == [0, 100, 200, 300, 400, 500]
    assert nice_ticks(-2.94, 2.94) == [-4, -2, 0, 2, 4]
    assert nice_ticks(5, 5) == [4, 4.5, 5, 5.5, 6]
    assert nice_ticks(-1e-14, 0) == [-1, -0.5, 0, 0.5, 1]  # rounding noise is one value
    assert tick_text(250_000) == "250k"
    assert tick_text(0.0001) == "1e-04"


def test_a_chart_without_data_says_so() -> None:
    html = line_chart(Chart("LLR", "games", "LLR", [Series("LLR", [])]))
    assert "no data yet" in html
    assert "<svg" not in html


def test_a_chart_escapes_every_text_and_has_no_inline_style() -> None:
    chart = Chart(
        "<script>x</script>",
        "games",
        "y",
        [Series("a<b", [(0, 0), (10, 1)])],
        rules=[Rule(0.5, '"bound"')],
    )
    html = str(line_chart(chart))
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "a&lt;b" in html
    assert "style=" not in html
    assert html.count("<polyline") == 1


def test_a_gauge_clamps_its_needle_to_the_scale() -> None:
    html = str(gauge(Gauge("LLR", 9.0, -2.94, 2.94, "9.00", marks=[(0.0, "0"), (1.0, "")])))
    assert 'cx="456.0"' in html  # the right end of the track
    assert html.count("<text") == 3  # label, value, one labelled mark


def sprt_run() -> RunRecord:
    args = {
        "tc": "10+0.1",
        "threads": 1,
        "num_games": 800_000,
        "new_tag": "patch",
        "sprt": {"llr": 0.0, "lower_bound": -2.94, "upper_bound": 2.94, "elo0": 0, "elo1": 2},
    }
    run = new_run_record("0" * 24, "alice", spec_of(args), T0)
    for step in range(1, 30):
        sprt = {**run.args.sprt, "llr": step / 10}
        penta = (step, 4 * step, 10 * step, 5 * step, step)
        run = evolve(
            run,
            args=evolve(run.args, sprt=sprt),
            pentanomial=penta,
            wins=2 * step + 5 * step,
            losses=2 * step + 4 * step,
            draws=4 * step + 20 * step + 5 * step,
        )
        run = history.record(run)
    return run


def test_an_sprt_run_gets_llr_and_elo_charts() -> None:
    llr, elo = (str(chart) for chart in run_charts.charts(sprt_run()))
    assert 'id="llr-chart"' in llr
    assert "accept 2.94" in llr
    assert "reject -2.94" in llr
    assert 'id="elo-chart"' in elo
    assert 'class="band"' in elo  # the confidence interval


def test_an_spsa_run_gets_its_parameters_scaled() -> None:
    params = [
        {"name": f"P{i}", "start": 100.0 * i, "c_end": 2.0 * (i + 1), "theta": 100.0 * i + 4}
        for i in range(14)
    ]
    spsa = {
        "iter": 5000,
        "num_iter": 10000,
        "params": params,
        "param_history": [[{"theta": p["start"] + 2, "R": 0, "c": 1} for p in params]] * 3,
    }
    args = {"tc": "10+0.1", "threads": 1, "num_games": 20000, "new_tag": "p", "spsa": spsa}
    (chart,) = run_charts.charts(new_run_record("0" * 24, "alice", spec_of(args), T0))
    html = str(chart)
    assert html.count("<polyline") == run_charts.MAX_SPSA_LINES
    assert "2 more parameters are in the table below." in html
    assert "(θ − start) / c_end" in html


def spsa_record(thetas: list[float]) -> RunRecord:
    """One parameter (start 100, c 4 throughout) sampled at these values."""
    param = {"name": "P", "start": 100.0, "c": 4.0, "c_end": 4.0, "theta": thetas[-1]}
    spsa = {
        "iter": 100 * len(thetas),
        "num_iter": 10_000,  # a sample every 100 iterations
        "params": [param],
        "param_history": [[{"theta": theta, "R": 0, "c": 4.0}] for theta in thetas],
    }
    args = {"tc": "10+0.1", "threads": 1, "num_games": 200, "new_tag": "p", "spsa": spsa}
    return new_run_record("0" * 24, "alice", spec_of(args), T0)


def plotted(chart: str) -> list[str]:
    """The tooltips of the chart's points: 'P: value at iteration'."""
    return re.findall(r"<title>(P: [^<]*)</title>", chart)


def test_the_spsa_chart_shows_values_or_a_share_of_c() -> None:
    record = spsa_record([102.0, 104.0, 98.0])
    (values,) = run_charts.charts(record, run_charts.SpsaView("values"))
    assert plotted(str(values)) == [
        "P: 100.000 at 0",
        "P: 102.000 at 100",
        "P: 104.000 at 200",
        "P: 98.000 at 300",
    ]
    (share,) = run_charts.charts(record, run_charts.SpsaView("c"))
    assert "% of c" in str(share)
    assert plotted(str(share)) == [
        "P: 0.000 at 0",
        "P: 50.000 at 100",
        "P: 100.000 at 200",
        "P: -50.000 at 300",
    ]


def test_smoothing_evens_the_samples_out() -> None:
    thetas = [100.0 + (8.0 if i % 2 else -8.0) for i in range(40)]
    record = spsa_record(thetas)
    (raw,) = run_charts.charts(record, run_charts.SpsaView("values"))
    (smooth,) = run_charts.charts(record, run_charts.SpsaView("values", smoothing=5))
    spread = [float(text.split(": ")[1].split(" at")[0]) for text in plotted(str(smooth))]
    assert max(spread) - min(spread) < 16.0 / 4
    assert plotted(str(raw)) != plotted(str(smooth))
    assert "smoothed (5)" in str(smooth)


def test_the_view_is_read_from_the_query_string() -> None:
    assert run_charts.spsa_view({"spsa_view": "c", "spsa_smooth": "3"}) == run_charts.SpsaView(
        "c", 3
    )
    assert run_charts.spsa_view({"spsa_view": "x", "spsa_smooth": "11"}) == run_charts.SpsaView()
