"""The new test form's SPSA helpers: "Autoselect" (stats.spsa_autoselect) writes
gains and a length for the given parameters into the form, for the author to
review before submitting, as the reference's checkbox does; and an SPSA run
tunes its branch against itself, so its base is its test branch.
Pure functions of the form's values."""

from collections.abc import Mapping
from typing import Any

from arbiter.domain.errors import ValidationError
from arbiter.domain.time_control import parse_time_control
from arbiter.stats.spsa import SpsaParseError, make_schedule, parse_params
from arbiter.stats.spsa_autoselect import (
    Interval,
    autoselect,
    seconds_per_move,
    virtual_draw_ratio,
)

GAMES_STEP = 1000  # an SPSA run's games are a multiple of this (domain.run_args)
AUTOSELECTED = (
    "Autoselected: c and r of each parameter (constant gains: A, alpha and gamma 0) and "
    "the number of games, to end within 0.5 Elo of the optimum with 95% probability if "
    "each parameter moves the Elo by about 2 over its interval. Review them and submit."
)


def autoselected(values: Mapping[str, Any], tc: str) -> dict[str, Any]:
    """The form's values with Autoselect's gains and games written in, at the time
    control `tc` (presets applied); ValidationError on the field that prevents it."""
    intervals = _intervals(str(values.get("spsa_raw_params", "")))
    clock = parse_time_control(tc, "tc")
    if clock.nodes is not None:
        raise ValidationError("tc", "Autoselect needs a clock time control, not fixed nodes")
    per_move = seconds_per_move(clock.seconds, clock.increment, clock.moves)
    chosen = autoselect(intervals, virtual_draw_ratio(per_move))
    games = max(GAMES_STEP, GAMES_STEP * round(chosen.num_games / GAMES_STEP))
    return {
        **values,
        "stop_rule": "spsa",
        "spsa_A": "0",
        "spsa_alpha": "0",
        "spsa_gamma": "0",
        "num_games": str(games),
        "spsa_raw_params": "\n".join(param.line() for param in chosen.params),
    }


def _intervals(raw_params: str) -> list[Interval]:
    try:
        parsed = parse_params(raw_params, make_schedule(GAMES_STEP))
    except SpsaParseError as error:
        raise ValidationError("spsa_raw_params", str(error)) from None
    return [Interval(p.name, p.start, p.min, p.max) for p in parsed]


def tuned_against_itself(values: Mapping[str, Any]) -> dict[str, Any]:
    """An SPSA run's base is its test branch, with the test branch's bench."""
    if values.get("stop_rule") != "spsa":
        return dict(values)
    return {**values, "base_tag": values["new_tag"], "base_signature": values["new_signature"]}
