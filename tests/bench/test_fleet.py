"""The fleet simulator as a correctness check (not a timing one): a few hundred
workers with chaos against a real primary, then the client's ledger of
acknowledged results must equal the server's run totals exactly, with no
server error and no reply that is not JSON. The full benchmark is
bench/fleet.py (docs/benchmarks.md)."""

from array import array
from pathlib import Path

import pytest

from bench.fleet import (
    HEAVY_CONCURRENCIES,
    Options,
    Phase,
    Setup,
    arbiter_phase,
    describe_steal,
    stalls,
)
from bench.lib import harness
from bench.lib.collector import COMMITS, UPDATE_BATCHES
from bench.lib.fleetsim import WORKER_CONCURRENCY, Cadence, Chaos, FleetConfig
from tests import fresh_loop
from tests.web.live_server import PASSWORD

WORKERS = 150
SECONDS = 15.0
# Updates every second, beats every two: tasks end, fail and crash within the run.
SPEEDUP = 60.0
CHAOS = Chaos(disconnect=0.01, failed_task=0.1, crash=0.05)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "mix"), [("sqlite", "steady"), ("postgresql", "steady"), ("sqlite", "heavy")]
)
def test_fleet_ledger_equals_server_totals(
    tmp_path: Path, backend: str, mix: str, request: pytest.FixtureRequest, repo_url: str
) -> None:
    database_url = ""
    if backend == "postgresql":
        database_url = request.getfixturevalue("postgres_database_url")
    data = tmp_path / "data"
    accounts = harness.create_accounts(data, database_url, users=3)
    options = Options(WORKERS, SECONDS, SPEEDUP, ramp=2.0, connections=WORKERS, chaos=True)
    heavy = mix == "heavy"
    config = FleetConfig(
        workers=WORKERS,
        cadence=Cadence.real(SPEEDUP),
        chaos=CHAOS,
        # heavy: account passwords, small machines' tasks of 5-7 one-batch updates
        tokens=[(name, PASSWORD) for name, _ in accounts.workers] if heavy else accounts.workers,
        ramp=options.ramp,
        batches_per_update=1 if heavy else 3,  # steady: tasks of 10 updates end in the run
        concurrencies=HEAVY_CONCURRENCIES if heavy else (WORKER_CONCURRENCY,),
        beat_after_update=heavy,
    )
    setup = Setup(data, database_url, accounts, repo_url, runs=3, pin=False)

    phase, fleet, problems, crashes = fresh_loop.run(arbiter_phase(setup, config, options))

    assert (problems, phase.errors) == ([], {})
    assert crashes == []
    assert phase.non_json == 0
    # The serving process timed its collector's pauses and counted its "too busy"
    # replies by reason, the calls it shed while its loop lagged, and its
    # commits and the update_task calls they carried; the window's were scraped.
    assert phase.server_seen is not None
    assert set(phase.server_seen.pauses) == {"0", "1", "2"}
    reasons = {"gate_full", "account_share", "overload", "overload 503"}
    assert set(phase.server_seen.too_busy) == reasons
    histograms = phase.server_seen.histograms
    assert histograms[COMMITS].count > 0
    assert histograms[UPDATE_BATCHES].count > 0
    assert histograms["/api/update_task"].count > 0
    # Its CPU was read by thread, each named: the loop and the results thread worked.
    named = {phase.thread_names.get(tid): cpu for tid, cpu in phase.thread_cpu.items()}
    assert named["MainThread"].total > 0
    assert named["arbiter-results"].total > 0
    # The host's steal was sampled about every second, and each latency knows its second.
    assert len(phase.steal_samples) >= 5
    for endpoint, latencies in phase.latencies.items():
        assert len(phase.latency_seconds[endpoint]) == len(latencies)
    assert phase.events.get("abrupt disconnects", 0) > 0
    # Workers moved on to new tasks (finished, failed or crashed ones), and most
    # tasks had results acknowledged: the ledger is not trivially empty.
    assert len(fleet.ledger.tasks) > WORKERS * 1.1
    played = [entry for entry in fleet.ledger.tasks.values() if entry.acked[0] + entry.acked[2]]
    assert len(played) > WORKERS * 0.8


def test_the_report_says_how_much_of_each_core_the_host_took() -> None:
    """Steal time, for the window of each phase: a floor measured while the host
    took more of the core than it did from the server is not a fair floor."""
    server = Phase("arbiter", 10, window=100.0, steal=(9.0, 2.5))
    floor = Phase("baseline", 10, window=50.0, steal=(4.0, 0.5))
    assert describe_steal(server, floor) == (
        "- Taken by the host (steal time): 9.0% of the server's core and 2.5% of the"
        " load generator's; the baseline's window: 8.0% of the server's core and 1.0%"
        " of the load generator's."
    )
    assert describe_steal(server, None).endswith("2.5% of the load generator's.")


def test_steal_time_is_read_per_core() -> None:
    before = harness.steal_seconds(harness.SERVER_CPU)
    assert 0.0 <= before[0] <= harness.steal_seconds(harness.SERVER_CPU)[0]
    assert harness.steal_seconds("no-such-cpu") == (0.0,)


def test_a_floor_measured_while_the_host_took_much_more_is_flagged() -> None:
    server = Phase("arbiter", 10, window=100.0, steal=(16.4, 15.8))
    floor = Phase("baseline", 10, window=100.0, steal=(39.7, 38.1))
    assert describe_steal(server, floor).endswith(
        " Not a fair floor: the host took over 5 points more in one window."
    )
    close = Phase("baseline", 10, window=100.0, steal=(12.0, 1.0))
    assert "fair" not in describe_steal(server, close)


def test_a_stall_is_a_second_whose_slowest_reply_took_over_a_second() -> None:
    phase = Phase("arbiter", WORKERS, window=3.0)
    phase.latencies = {"/api/beat": [0.002, 1.5, 0.004], "/api/update_task": [2.5, 0.003]}
    phase.latency_seconds = {
        "/api/beat": array("I", [0, 1, 2]),
        "/api/update_task": array("I", [1, 2]),
    }
    assert phase.worst_by_second() == {0: 0.002, 1: 2.5, 2: 0.004}
    assert stalls(phase) == (
        "- Stalls (a reply over 1 s): in 1 of 3 seconds; the worst at +1 s of the window, 2.5 s."
    )
    phase.latencies["/api/update_task"] = [0.25, 0.003]
    phase.latencies["/api/beat"][1] = 0.1
    assert stalls(phase) == "- Stalls (a reply over 1 s): none; slowest reply 250 ms."
