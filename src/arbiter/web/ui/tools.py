"""The SPRT calculator (/sprt_calc): pass probability and expected games of an
SPRT for a range of true Elo values, computed on the server (`stats.sprt_forecast`)
and drawn as SVG. A GET form, so a result can be bookmarked and works without script."""

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.stats.sprt_forecast import SprtForecast, forecast_table, sprt_forecast
from arbiter.web.templating import render
from arbiter.web.ui.submission import BOUNDS_PRESETS
from arbiter.web.ui.svg import Chart, Rule, Series, line_chart

DEFAULTS = {"elo0": "0", "elo1": "2", "alpha": "0.05", "beta": "0.05", "elo": ""}
MAX_BOUND = 50.0


@dataclass(frozen=True, slots=True)
class Calculation:
    table: list[SprtForecast]
    chosen: SprtForecast | None
    charts: list[Markup]


def parse(params: dict[str, str]) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """(values to show, parsed numbers, errors by field)."""
    values = {key: params.get(key, default).strip() for key, default in DEFAULTS.items()}
    numbers: dict[str, float] = {}
    errors: dict[str, str] = {}
    for key, text in values.items():
        if key == "elo" and not text:
            continue
        try:
            number = float(text)
        except ValueError:
            errors[key] = "must be a number"
            continue
        if not math.isfinite(number) or abs(number) > MAX_BOUND:
            errors[key] = f"must be between -{MAX_BOUND:g} and {MAX_BOUND:g}"
        else:
            numbers[key] = number
    for key in ("alpha", "beta"):
        if key in numbers and not 0.0 < numbers[key] < 0.5:
            errors[key] = "must be between 0 and 0.5"
    if not errors and numbers["elo1"] <= numbers["elo0"]:
        errors["elo1"] = "must be greater than elo0"
    return values, numbers, errors


def calculate(numbers: dict[str, float]) -> Calculation:
    elo0, elo1 = numbers["elo0"], numbers["elo1"]
    alpha, beta = numbers["alpha"], numbers["beta"]
    table = forecast_table(elo0, elo1, alpha=alpha, beta=beta)
    chosen = None
    if "elo" in numbers:
        chosen = sprt_forecast(elo0, elo1, numbers["elo"], alpha=alpha, beta=beta)
    pass_chart = Chart(
        "Pass probability against the true Elo",
        "true normalized Elo",
        "pass probability (%)",
        [Series("pass probability", [(f.nelo, 100 * f.pass_probability) for f in table])],
        rules=[Rule(100 * alpha, "alpha"), Rule(100 * (1 - beta), "1 − beta")],
        legend=False,
        id="pass-chart",
    )
    games_chart = Chart(
        "Expected number of games against the true Elo",
        "true normalized Elo",
        "expected games",
        [Series("expected games", [(f.nelo, f.expected_games) for f in table], "s1")],
        legend=False,
        id="games-chart",
    )
    return Calculation(table, chosen, [line_chart(pass_chart), line_chart(games_chart)])


async def sprt_calc(request: Request) -> Response:
    values, numbers, errors = parse(dict(request.query_params))
    result = None if errors else await run_in_threadpool(calculate, numbers)
    context: dict[str, Any] = {
        "values": values,
        "errors": errors,
        "result": result,
        "presets": BOUNDS_PRESETS,
    }
    return await render(request, "sprt_calc.html", context, 400 if errors else 200)
