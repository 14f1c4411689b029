"""The PostgreSQL restart's recovery figure, from request times (plain values)."""

import pytest

from bench.faults import outage_recovery


def test_recovery_runs_from_the_first_failed_request() -> None:
    # stop at 100 s, back at 106 s; failures from 100.4 s to 106.3 s; first ack 106.1 s
    recovery = outage_recovery(100.0, 106.0, [99.0, 100.4, 103.0, 106.3], [106.1, 107.0])
    assert recovery.after_back == pytest.approx(0.3)
    assert recovery.text.startswith("Recovery: 5.90 s from the first failed request (0.40 s")
    assert "+0.30 s from the database's return" in recovery.text
    assert "(+0.10 s); 3 failed requests" in recovery.text


def test_recovery_waits_for_the_first_acknowledged_reply() -> None:
    recovery = outage_recovery(100.0, 106.0, [100.5, 105.0], [107.5])
    assert recovery.text.startswith("Recovery: 7.00 s from the first failed request")
    assert recovery.after_back == 0.0


def test_no_failure_is_said_so_not_shown_as_zero() -> None:
    recovery = outage_recovery(100.0, 106.0, [99.0], [106.2])
    assert recovery.text == "Recovery: no request failed while the database was down"
