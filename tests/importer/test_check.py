"""The import check's comparison of a finished_run line with Arbiter's numbers."""

import pytest

from arbiter.importer.check import CheckReport, _compare_message

OURS = {"elo": -0.0, "ci_low": -251.78, "ci_high": 251.78, "los": 0.5}


@pytest.mark.parametrize("elo", ["0.00", "-0.00"])
def test_a_zero_estimate_matches_whatever_sign_rounding_gave_it(elo: str) -> None:
    """Results even on both sides: the reference prints 0.00 or -0.00 by a trace
    of rounding, and so does Arbiter, each its own way."""
    for ours in (OURS, {**OURS, "elo": 0.0}):
        report = CheckReport()
        line = f"Result:accepted Elo:{elo}[-251.78,251.78] LOS:50% Games:10 Ptnml:[1,1,1,1,1]"
        _compare_message("a" * 24, line, ours, report)
        assert report.differences == []


def test_other_numbers_must_match_to_the_printed_digit() -> None:
    report = CheckReport()
    line = "Result:accepted Elo:-0.01[-251.78,251.78] LOS:50% Games:10 Ptnml:[1,1,1,1,1]"
    _compare_message("a" * 24, line, OURS, report)
    assert [d.quantity for d in report.differences] == ["finished_run message"]
    report = CheckReport()
    line = "Result:accepted Elo:0.00[-251.78,-0.001] LOS:50% Games:10 Ptnml:[1,1,1,1,1]"
    _compare_message("a" * 24, line, OURS, report)
    assert len(report.differences) == 1
