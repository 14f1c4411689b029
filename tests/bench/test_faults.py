"""The PostgreSQL restart's recovery figure, from request times (plain values),
and the failover to a promoted replica, short, on real clusters."""

import pytest

from bench import faults
from bench.faults import outage_recovery
from tests import fresh_loop
from tests.conftest import postgres_admin_url


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


@pytest.mark.slow
def test_a_promoted_replica_takes_over_with_nothing_acknowledged_lost() -> None:
    """bench/faults.py's failover, short: a primary with a synchronous replica
    (scripts/postgres start-pair) behind one multi-host URL; under a reporting
    fleet the primary dies (pg_ctl -m immediate) and the replica is promoted.
    The server stays up, answers only JSON, serves again within 15 s and its
    totals equal the ledger of acknowledged results."""
    if postgres_admin_url() is None:
        pytest.skip("PostgreSQL not available (set ARBITER_TEST_POSTGRES_URL)")
    args = ["failover", "--workers", "40", "--speedup", "30", "--ramp", "2", "--settle", "8"]
    args += ["--runs", "2", "--users", "2", "--no-pin"]
    lines, failed = fresh_loop.run(faults.postgres_failover(faults.parse_args(args)))
    assert failed == [], lines
    report = "\n".join(lines)
    assert "ledger exact" in report
    assert "From the fault to the first acknowledged result" in report


@pytest.mark.slow
def test_a_standby_takes_over_a_frozen_primary_under_a_fleet() -> None:
    """bench/faults.py's standby scenario, short: a fleet reports through a proxy
    that follows /readyz while the primary is frozen, then woken; the standby
    serves, and the ledger is exact against it (the woken primary wrote
    nothing)."""
    if postgres_admin_url() is None:
        pytest.skip("PostgreSQL not available (set ARBITER_TEST_POSTGRES_URL)")
    args = ["standby", "--fault", "freeze", "--lease-check", "1", "--workers", "40"]
    args += ["--speedup", "30", "--ramp", "2", "--settle", "6", "--runs", "2", "--users", "2"]
    lines, failed = fresh_loop.run(faults.standby_takeover(faults.parse_args([*args, "--no-pin"])))
    assert failed == [], lines
    assert "ledger exact" in "\n".join(lines)
