"""The heartbeat: a beat after two minutes of silence; a dead task ends."""

from typing import Any

import httpx2 as httpx

from arbiter.worker.control import Control
from arbiter.worker.heartbeat import Heartbeat
from tests.worker.fakes import RUN_ID, FakeServer


def beating(alive: Any) -> tuple[FakeServer, Heartbeat, Control, list[float]]:
    now = [1000.0]
    server = FakeServer(
        lambda _p, _b: alive if not isinstance(alive, bool) else {"task_alive": alive}
    )
    client = server.client(clock=lambda: now[0])
    control = Control()
    return server, Heartbeat(client, control, clock=lambda: now[0]), control, now


def test_no_beat_without_a_task_or_while_in_contact() -> None:
    server, heartbeat, control, now = beating(True)
    now[0] += 500
    heartbeat.check()  # no task
    control.start_task(RUN_ID, 2)
    heartbeat.client.last_contact = now[0] - 60
    heartbeat.check()  # heard from recently
    assert server.calls == []


def test_a_beat_after_silence_keeps_the_task() -> None:
    server, heartbeat, control, now = beating(True)
    control.start_task(RUN_ID, 2)
    now[0] += 121
    heartbeat.check()
    assert server.paths() == ["/api/beat"]
    assert not control.task_abort.is_set()
    heartbeat.check()  # the beat was contact: no second one
    assert len(server.calls) == 1


def test_a_dead_task_is_aborted() -> None:
    _server, heartbeat, control, now = beating(False)
    control.start_task(RUN_ID, 2)
    now[0] += 200
    heartbeat.check()
    assert control.task_abort.is_set()
    assert not control.stopping.is_set()
    control.start_task(RUN_ID, 3)
    assert not control.task_abort.is_set()  # the next task starts clean


def test_a_failing_server_is_retried_slowly() -> None:
    server, heartbeat, control, now = beating(httpx.ConnectError("down"))
    control.start_task(RUN_ID, 2)
    now[0] += 200
    heartbeat.check()
    now[0] += 1
    heartbeat.check()
    now[0] += 15
    heartbeat.check()
    assert len(server.calls) == 2
    assert not control.task_abort.is_set()


def test_a_late_answer_does_not_abort_the_next_task() -> None:
    control = Control()
    control.start_task(RUN_ID, 2)
    control.end_task()
    control.start_task(RUN_ID, 3)
    assert not control.abort_task(RUN_ID, 2)
    assert not control.task_abort.is_set()


def test_thread_starts_and_stops() -> None:
    _server, heartbeat, _control, _now = beating(True)
    heartbeat.tick = 0.01
    heartbeat.start()
    heartbeat.stop()
    assert not heartbeat._thread.is_alive()
