"""A percentile is shown as one only where enough samples lie above it."""

from bench.fleet import tail
from bench.lib.fleetsim import supported


def test_a_tail_percentile_needs_ten_samples_above_it() -> None:
    assert supported(20, 50)
    assert not supported(21, 99.9)  # 21 request_task samples, as one short run had
    assert not supported(999, 99)
    assert supported(1000, 99)
    assert supported(10_000, 99.9)


def test_an_unsupported_percentile_is_shown_in_parentheses() -> None:
    assert tail(12.345, 21, 99.9) == "(12.35)"
    assert tail(12.345, 10_000, 99.9) == "12.35"
