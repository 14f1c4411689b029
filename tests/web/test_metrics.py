"""`/metrics`: Prometheus text with requests by route, latencies, occupancy
gauges and the process-wide histograms, served only to allowed addresses."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

import arbiter.web.app as app_module
from arbiter.runtime.settings import Settings, SettingsError, parse_networks
from arbiter.web.app import create_app
from arbiter.web.metrics import RequestStats, address_allowed
from arbiter.web.overload import LAG_LIMIT
from tests.domain.runs.support import pairs
from tests.web.api_support import api_settings, approved, take_task, users, wire, worker_body
from tests.web.support import state

LOCAL = ("127.0.0.1", 40000)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return api_settings(tmp_path, database_url)


def local_client(settings: Settings, monkeypatch: pytest.MonkeyPatch, client: tuple[str, int]):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(app_module, "DRAIN_SECONDS", 0.0)
    return TestClient(create_app(settings), base_url="http://testserver", client=client)


@pytest.fixture
def client(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    with local_client(settings, monkeypatch, LOCAL) as test_client:
        yield test_client


def samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = client.get("/metrics")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain; version=")
    found = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_requests_are_counted_by_route_template_method_and_status(client: TestClient) -> None:
    client.get("/api/get_run/0123456789abcdef01234567")
    client.get("/api/get_run/0123456789abcdef0123456f")
    client.get("/no/such/page")
    found = samples(client)
    labels = (("method", "GET"), ("route", "/api/get_run/{run_id}"), ("status", "404"))
    assert found[("arbiter_requests_total", labels)] == 2
    unrouted = (("method", "GET"), ("route", "unrouted"), ("status", "404"))
    assert found[("arbiter_requests_total", unrouted)] == 1
    count = found[("arbiter_request_duration_seconds_count", (("route", "/api/get_run/{run_id}"),))]
    assert count == 2


def test_gauges_show_the_live_runs_workers_gate_and_threadpool(
    client: TestClient, repo_url: str
) -> None:
    users(client)
    approved(client, repo_url)
    take_task(client, "alice")
    found = samples(client)
    assert found[("arbiter_active_runs", ())] == 1
    assert found[("arbiter_active_workers", ())] == 1
    assert found[("arbiter_task_gate_places", ())] == 5
    assert found[("arbiter_task_gate_places_held", ())] == 0
    assert found[("arbiter_threadpool_threads_limit", ())] == 200
    assert found[("arbiter_primary_lease_held", ())] == 1
    assert found[("arbiter_job_queue_depth", ())] == 0
    # The task was handed out in a batch of one, committed and timed.
    assert found[("arbiter_scheduler_batch_size_count", ())] >= 1
    assert found[("arbiter_commit_duration_seconds_count", ())] >= 1
    assert found[("arbiter_overload_shedding", ())] == 0
    assert ("arbiter_loop_lag_worst_seconds", ()) in found
    for generation in "012":  # timed by the serving process, present (and 0) in any app
        assert ("arbiter_gc_pause_seconds_count", (("generation", generation),)) in found
    assert ("process_cpu_seconds_total", ()) in found


def test_a_result_update_is_counted_in_a_batch(client: TestClient, repo_url: str) -> None:
    users(client)
    run_id = approved(client, repo_url)
    task_id = take_task(client, "alice")["task_id"]
    body = worker_body("alice", run_id=run_id, task_id=task_id, stats=wire(pairs(dd=1)))
    assert client.post("/api/update_task", json=body).json()["task_alive"] is True
    assert samples(client)[("arbiter_update_batch_size_count", ())] >= 1


def test_too_busy_is_counted_by_reason(client: TestClient, repo_url: str) -> None:
    """A full gate and an account past its share are told apart, so an operator
    knows whether the gate or one account's bursts refused the calls."""

    def refused(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[float]:
        return [
            found[("arbiter_request_task_too_busy_total", (("reason", reason),))]
            for reason in ("gate_full", "account_share")
        ]

    users(client)
    approved(client, repo_url)
    before = refused(samples(client))
    gate = state(client).runs.scheduler._gate
    while gate.enter("alice"):  # alice holds her share of the gate
        pass
    for holder in ("root", "carol", "dave"):
        gate.enter(holder)  # and others the rest
    try:
        body = worker_body("root", key="r1")
        reply = client.post("/api/request_task", json=body).json()
        assert reply["info"].startswith("Request_task: the server is currently too busy")
    finally:
        for holder in ("alice", "alice", "root", "carol", "dave"):
            gate.leave(holder)
    after = refused(samples(client))
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1]


def shed_calls(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[float]:
    name = "arbiter_overload_shed_calls_total"
    return [found.get((name, (("reply", reply),)), 0.0) for reply in ("too_busy", "503")]


def test_shedding_shows_in_the_metrics(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gauge while it lasts, and a count of the calls turned away (the
    counters are process-wide: compared before and after)."""
    shedding = settings.with_changes(overload_lag_ms=int(LAG_LIMIT * 1000))
    with local_client(shedding, monkeypatch, LOCAL) as client:
        before = shed_calls(samples(client))
        client.app.state.loop_lag.observe(LAG_LIMIT * 2)  # type: ignore[attr-defined]
        for path in ("/api/request_task", "/api/beat", "/api/update_task"):
            client.post(path, json=worker_body(run_id="0" * 24, task_id=0))
        found = samples(client)
    assert found[("arbiter_overload_shedding", ())] == 1
    assert found[("arbiter_loop_lag_worst_seconds", ())] == LAG_LIMIT * 2
    after = shed_calls(found)
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 2]


def test_metrics_are_refused_to_an_address_not_allowed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with local_client(settings, monkeypatch, ("203.0.113.9", 40000)) as outsider:
        reply = outsider.get("/metrics")
    assert reply.status_code == 403
    assert "arbiter_" not in reply.text
    allowed = settings.with_changes(metrics_allow="10.0.0.0/8, 203.0.113.0/24")
    with local_client(allowed, monkeypatch, ("203.0.113.9", 40000)) as monitor:
        assert monitor.get("/metrics").status_code == 200


def test_allowed_addresses_are_parsed_and_matched() -> None:
    networks = parse_networks("127.0.0.1, ::1,10.1.0.0/16")
    assert address_allowed("127.0.0.1", networks)
    assert address_allowed("::1", networks)
    assert address_allowed("::ffff:10.1.2.3", networks)  # an IPv4 client on a dual-stack socket
    assert not address_allowed("10.2.0.1", networks)
    assert not address_allowed("testclient", networks)
    assert not address_allowed("127.0.0.1", parse_networks(""))
    with pytest.raises(SettingsError, match="ARBITER_METRICS_ALLOW: 'localhost'"):
        Settings(metrics_allow="localhost").validate()


def test_latency_buckets_count_each_request_at_or_below_their_bound() -> None:
    stats = RequestStats()
    for seconds in (0.001, 0.002, 20.0):
        stats.observe("/api/beat", "POST", 200, seconds)
    registry = CollectorRegistry()
    registry.register(stats)
    text = generate_latest(registry).decode()
    found = {
        (sample.name, sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert found[("arbiter_request_duration_seconds_bucket", "0.001")] == 1  # le: inclusive
    assert found[("arbiter_request_duration_seconds_bucket", "0.0025")] == 2
    assert found[("arbiter_request_duration_seconds_bucket", "10.0")] == 2
    assert found[("arbiter_request_duration_seconds_bucket", "+Inf")] == 3
    assert found[("arbiter_request_duration_seconds_count", None)] == 3
    assert found[("arbiter_request_duration_seconds_sum", None)] == pytest.approx(20.003)
    assert found[("arbiter_requests_total", None)] == 3
