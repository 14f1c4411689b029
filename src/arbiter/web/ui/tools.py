"""The SPRT calculator (/sprt_calc): pass probability and expected games of an
SPRT for a range of true Elo values, computed on the server (`stats.sprt_forecast`)
and drawn as SVG. As the reference's: bounds in normalized or logistic Elo, a
draw ratio and an RMS bias (what the book's openings do to a game's
variance), charted against the true logistic Elo. A GET form, so a result can
be bookmarked and works without script."""

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.stats.sprt_forecast import (
    ELO_MODELS,
    SprtForecast,
    SprtModel,
    model_forecast,
    model_table,
    sprt_model,
)
from arbiter.web.templating import render
from arbiter.web.ui.submission import BOUNDS_PRESETS
from arbiter.web.ui.svg import Chart, Rule, Series, line_chart

DEFAULTS = {
    "elo_model": "normalized",
    "elo0": "0",
    "elo1": "2",
    "alpha": "0.05",
    "beta": "0.05",
    "draw_ratio": "0.49",
    "rms_bias": "191",
    "elo": "",
}
MAX_BOUND = 50.0
MAX_RMS_BIAS = 1000.0
# Which field a refusal of the model is about (its message names it).
_MODEL_FIELDS = (
    ("not compatible", "rms_bias"),
    ("draw ratio", "draw_ratio"),
    ("RMS bias", "rms_bias"),
    ("elo1", "elo1"),
)


@dataclass(frozen=True, slots=True)
class Calculation:
    table: list[SprtForecast]
    chosen: SprtForecast | None
    charts: list[Markup]
    logistic_bounds: tuple[float, float]
    normalized_bounds: tuple[float, float]


def parse(params: dict[str, str]) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """(values to show, parsed numbers, errors by field)."""
    values = {key: params.get(key, default).strip() for key, default in DEFAULTS.items()}
    numbers: dict[str, float] = {}
    errors: dict[str, str] = {}
    if values["elo_model"] not in ELO_MODELS:
        errors["elo_model"] = f"must be one of {', '.join(ELO_MODELS)}"
    for key, text in values.items():
        if key == "elo_model" or (key == "elo" and not text):
            continue
        try:
            number = float(text)
        except ValueError:
            errors[key] = "must be a number"
            continue
        bound = MAX_RMS_BIAS if key == "rms_bias" else MAX_BOUND
        if not math.isfinite(number) or abs(number) > bound:
            errors[key] = f"must be between -{bound:g} and {bound:g}"
        else:
            numbers[key] = number
    for key in ("alpha", "beta"):
        if key in numbers and not 0.0 < numbers[key] < 0.5:
            errors[key] = "must be between 0 and 0.5"
    return values, numbers, errors


def model_of(values: dict[str, str], numbers: dict[str, float]) -> SprtModel | dict[str, str]:
    """The calculator's model, or the error of the field that makes it impossible."""
    try:
        return sprt_model(
            values["elo_model"],
            numbers["elo0"],
            numbers["elo1"],
            draw_ratio=numbers["draw_ratio"],
            rms_bias=numbers["rms_bias"],
        )
    except ValueError as error:
        message = str(error)
        field = next((key for words, key in _MODEL_FIELDS if words in message), "elo1")
        return {field: message}


def calculate(model: SprtModel, numbers: dict[str, float]) -> Calculation:
    alpha, beta = numbers["alpha"], numbers["beta"]
    table = model_table(model, alpha=alpha, beta=beta)
    chosen = None
    if "elo" in numbers:
        chosen = model_forecast(model, numbers["elo"], alpha=alpha, beta=beta)
    pass_chart = Chart(
        "Pass probability against the true Elo",
        "true logistic Elo",
        "pass probability (%)",
        [Series("pass probability", [(f.elo, 100 * f.pass_probability) for f in table])],
        rules=[Rule(100 * alpha, "alpha"), Rule(100 * (1 - beta), "1 − beta")],
        legend=False,
        id="pass-chart",
    )
    games_chart = Chart(
        "Expected number of games against the true Elo",
        "true logistic Elo",
        "expected games",
        [Series("expected games", [(f.elo, f.expected_games) for f in table], "s1")],
        legend=False,
        id="games-chart",
    )
    return Calculation(
        table,
        chosen,
        [line_chart(pass_chart), line_chart(games_chart)],
        _shown(model.logistic_bounds),
        _shown(model.normalized_bounds),
    )


def _shown(bounds: tuple[float, ...]) -> tuple[float, float]:
    """Bounds to print: no "-0.00" for a bound at 0."""
    return bounds[0] + 0.0, bounds[1] + 0.0


async def sprt_calc(request: Request) -> Response:
    values, numbers, errors = parse(dict(request.query_params))
    result = None
    if not errors:
        model = model_of(values, numbers)
        if isinstance(model, dict):
            errors = model
        else:
            result = await run_in_threadpool(calculate, model, numbers)
    context: dict[str, Any] = {
        "values": values,
        "errors": errors,
        "result": result,
        "presets": BOUNDS_PRESETS,
    }
    return await render(request, "sprt_calc.html", context, 400 if errors else 200)
