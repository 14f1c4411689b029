"""calc_elo: the pure reply of GET /api/calc_elo and its 400 messages."""

import pytest

from arbiter.stats import CalcEloError, calc_elo
from tests.stats.support import close

PENTA = {"LL": "39", "LD": "2226", "DDWL": "31451", "WD": "2412", "WW": "40"}


def test_fixed_games_row_18() -> None:
    reply = calc_elo({"W": "100", "D": "200", "L": "80"})
    assert list(reply) == ["elo", "ci", "LOS"]
    assert reply["elo"] == close(18.302996224270025)
    assert reply["ci"] == [close(-5.77422640687368), close(42.38021885541373)]
    assert reply["LOS"] == close(0.9325545227452039)


def test_pentanomial_takes_precedence() -> None:
    reply = calc_elo({**PENTA, "W": "1", "D": "1", "L": "1"})
    assert reply["elo"] == close(0.902981048809024)


def test_sprt_default_normalized_row_20() -> None:
    reply = calc_elo({**PENTA, "elo0": "0.764", "elo1": "3.439"})
    assert list(reply) == ["a", "b", "elo", "ci", "LOS", "LLR"]
    assert reply["elo"] == close(0.8651598534526277)
    assert reply["LLR"] == close(2.162940869584568)


def test_sprt_bayeselo_row_22() -> None:
    query = {"W": "1450", "D": "4000", "L": "1500", "elo0": "0", "elo1": "6"}
    reply = calc_elo({**query, "elo_model": "BayesElo"})
    assert reply["elo"] == close(-2.326243144773433)
    assert reply["LLR"] == close(-2.4516259587766775)


@pytest.mark.parametrize("trinomial", [{}, {"W": "1450", "D": "4000", "L": "1500"}])
def test_sprt_bayeselo_of_a_pentanomial(trinomial: dict[str, str]) -> None:
    """As the reference: W, D, L are ignored and the draw ratio comes from three
    empty counts (equal thirds), so the bounds are converted with drawelo 200·log10 4."""
    query = {**PENTA, **trinomial, "elo0": "0", "elo1": "2", "elo_model": "BayesElo"}
    reply = calc_elo(query)
    assert reply["elo"] == close(0.8906651327387637)
    assert reply["ci"] == [close(-0.2173726175668283), close(1.99532900016802)]
    assert reply["LOS"] == close(0.9498478487088158)
    assert reply["LLR"] == close(0.22308878032900664)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({}, "give either W, D, L or"),
        ({"W": "1", "D": "2"}, "missing parameter L"),
        ({"W": "1", "D": "-2", "L": "3"}, "D='-2' must be a non-negative integer"),
        ({"W": "1", "D": "2.5", "L": "3"}, "D='2.5'"),
        ({"W": "1", "D": "²", "L": "3"}, "D="),
        ({"W": "0", "D": "0", "L": "0"}, "W\\+D\\+L must be positive"),
        ({"W": str(2**32), "D": "1", "L": "0"}, "too large"),
        ({**PENTA, "WW": "2147483648"}, "too large"),
        ({"W": "9" * 5000, "D": "1", "L": "0"}, "parameter W is too large"),
        ({"LL": "1"}, "missing parameter LD"),
        ({**PENTA, "elo0": "0"}, "missing parameter elo1"),
        ({**PENTA, "elo1": "2"}, "missing parameter elo0"),
        ({**PENTA, "elo0": "x", "elo1": "2"}, "elo0='x' is not a number"),
        ({**PENTA, "elo0": "0", "elo1": "11"}, "elo1='11' must be between -10 and 10"),
        ({**PENTA, "elo0": "nan", "elo1": "1"}, "elo0='nan'"),
        ({**PENTA, "elo0": "0", "elo1": "0.4"}, "at least elo0 \\+ 0.5"),
        ({**PENTA, "elo0": "0", "elo1": "2", "elo_model": "glicko"}, "elo_model='glicko'"),
    ],
)
def test_errors_name_the_parameter(query: dict[str, str], message: str) -> None:
    with pytest.raises(CalcEloError, match=message):
        calc_elo(query)


def test_error_is_a_value_error() -> None:
    assert issubclass(CalcEloError, ValueError)


def test_leading_zeros_do_not_count_as_digits() -> None:
    padded = {"W": "0" * 5000 + "7", "D": "3", "L": "2"}
    assert calc_elo(padded) == calc_elo({"W": "7", "D": "3", "L": "2"})
