"""The pure part of `GET /api/calc_elo` (reference §1.3).

Takes the raw query-string values and returns the reply dict (without
`duration`): `{elo, ci, LOS}` for fixed games, plus `{a, b, LLR}` when SPRT
bounds are given. Any bad or missing parameter raises CalcEloError naming it;
the web layer turns that into a 400 JSON error.
"""

import math
import re
from collections.abc import Mapping

from arbiter.stats.elo import fixed_games_elo
from arbiter.stats.sprt_elo import sprt_elo

PENTANOMIAL_KEYS = ("LL", "LD", "DDWL", "WD", "WW")
TRINOMIAL_KEYS = ("L", "D", "W")
ELO_MODELS = ("BayesElo", "logistic", "normalized")
MAX_GAMES = 2**32
MAX_COUNT_DIGITS = len(str(MAX_GAMES))  # longer counts are refused before int() reads them
MAX_BOUND = 10.0
MIN_BOUND_GAP = 0.5

_DIGITS = re.compile(r"[0-9]+")


class CalcEloError(ValueError):
    """A calc_elo parameter is missing or invalid; the message names it."""


def _count(query: Mapping[str, str], key: str) -> int:
    if key not in query:
        raise CalcEloError(f"missing parameter {key}")
    text = query[key].strip()
    if not _DIGITS.fullmatch(text):
        raise CalcEloError(f"parameter {key}={query[key]!r} must be a non-negative integer")
    # int() of thousands of digits is slow, and refused past Python's limit.
    digits = text.lstrip("0") or "0"
    if len(digits) > MAX_COUNT_DIGITS:
        raise CalcEloError(f"parameter {key} is too large (at most 2^32 games)")
    return int(digits)


def _counts(query: Mapping[str, str], keys: tuple[str, ...]) -> list[int] | None:
    if not any(k in query for k in keys):
        return None
    return [_count(query, k) for k in keys]


def _results(query: Mapping[str, str]) -> tuple[list[int] | None, list[int] | None]:
    """(pentanomial, [L, D, W]); at least one of them, each with a sane total."""
    penta, ldw = _counts(query, PENTANOMIAL_KEYS), _counts(query, TRINOMIAL_KEYS)
    if penta is None and ldw is None:
        raise CalcEloError("give either W, D, L or LL, LD, DDWL, WD, WW")
    for counts, games_per_count, names in ((penta, 2, "LL+LD+DDWL+WD+WW"), (ldw, 1, "W+D+L")):
        if counts is None:
            continue
        if sum(counts) == 0:
            raise CalcEloError(f"{names} must be positive")
        if games_per_count * sum(counts) > MAX_GAMES:
            raise CalcEloError(f"{names} is too large (at most 2^32 games)")
    return penta, ldw


def _bound(query: Mapping[str, str], key: str) -> float:
    try:
        value = float(query[key])
    except ValueError:
        raise CalcEloError(f"parameter {key}={query[key]!r} is not a number") from None
    if not (math.isfinite(value) and -MAX_BOUND <= value <= MAX_BOUND):
        raise CalcEloError(f"parameter {key}={query[key]!r} must be between -10 and 10")
    return value


def _bounds(query: Mapping[str, str]) -> tuple[float, float] | None:
    present = [k for k in ("elo0", "elo1") if k in query]
    if not present:
        return None
    if len(present) == 1:
        missing = "elo1" if present == ["elo0"] else "elo0"
        raise CalcEloError(f"missing parameter {missing} (elo0 and elo1 go together)")
    elo0, elo1 = _bound(query, "elo0"), _bound(query, "elo1")
    if elo1 < elo0 + MIN_BOUND_GAP:
        raise CalcEloError(f"elo1={elo1:g} must be at least elo0 + 0.5 = {elo0 + 0.5:g}")
    return elo0, elo1


def _model(query: Mapping[str, str]) -> str:
    model = query.get("elo_model", "normalized")
    if model not in ELO_MODELS:
        raise CalcEloError(
            f"parameter elo_model={model!r} must be BayesElo, logistic or normalized"
        )
    return model


def calc_elo(query: Mapping[str, str]) -> dict[str, object]:
    """Elo calculator: fixed-games estimate, or SPRT estimate when elo0/elo1 are given."""
    penta, ldw = _results(query)
    results = penta if penta is not None else ldw
    assert results is not None
    bounds = _bounds(query)
    model = _model(query)
    if bounds is None:
        est = fixed_games_elo(results)
        return {"elo": est.elo, "ci": [est.ci[0], est.ci[1]], "LOS": est.los}
    if penta is not None:
        # The reference ignores W, D, L once it has a pentanomial, and takes the
        # BayesElo draw ratio from the W, D, L its results then lack: three zero
        # counts, regularized into equal thirds (drawelo = 200·log10 4).
        ldw = [0, 0, 0]
    reply = sprt_elo(results, bounds[0], bounds[1], model, ldw=ldw)
    return reply.as_dict()
