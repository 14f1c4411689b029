"""A task's copy of its worker_info: the reference's JSON, and never walked by the collector."""

import gc

import msgspec
import pytest

from arbiter.domain.runs import task_info
from arbiter.domain.runs.task_info import task_worker_info
from tests.domain.runs.support import worker


def test_the_copy_is_what_the_worker_sent_and_where_from() -> None:
    """All but the nps a worker measured in its last task's games: a new task
    gets its own (update_task brings it)."""
    sent = worker(game_nps=650_000.0)
    info = task_worker_info(sent, "203.0.113.7")
    expected = {**msgspec.to_builtins(sent), "remote_addr": "203.0.113.7", "country_code": "?"}
    del expected["game_nps"]
    assert info == expected
    assert msgspec.json.decode(msgspec.json.encode(info))["python_version"] == [3, 11, 7]


def test_tasks_of_workers_alike_share_their_sequences() -> None:
    first = task_worker_info(worker(key="aaaa"), "203.0.113.7")
    second = task_worker_info(worker(key="bbbb"), "203.0.113.8")
    for name in ("architecture", "python_version", "gcc_version"):
        assert first[name] == second[name]
        assert first[name] is second[name]


def test_once_its_sequences_survived_a_collection_a_copy_is_never_tracked() -> None:
    task_worker_info(worker(python_version=[3, 13, 1]), "203.0.113.7")
    gc.collect()  # the shared tuples, seen once, are let go of by the collector
    later = task_worker_info(worker(key="cccc", python_version=[3, 13, 1]), "203.0.113.9")
    assert not gc.is_tracked(later)


def test_the_shared_table_stops_growing_at_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_info, "_shared_values", {})
    monkeypatch.setattr(task_info, "MAX_SHARED_VALUES", 2)
    versions = [[12, minor, 0] for minor in range(4)]
    copies = [task_worker_info(worker(gcc_version=v), "203.0.113.7") for v in versions]
    assert [copy["gcc_version"] for copy in copies] == [tuple(v) for v in versions]
    assert len(task_info._shared_values) == 2
