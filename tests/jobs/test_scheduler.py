"""The job scheduler, with real short periods: schedule, no self-overlap,
failures, stop, run_now, and the threads jobs run on."""

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from arbiter.jobs.scheduler import JOB_THREADS, Job, JobScheduler, jittered
from arbiter.storage import StorageUnavailable
from tests.jobs.support import wait_until

FAST = 0.05

SchedulerFactory = Callable[..., JobScheduler]


@pytest.fixture
def release() -> threading.Event:
    """Set at teardown so no blocked job outlives its test."""
    return threading.Event()


@pytest.fixture
def make_scheduler(release: threading.Event) -> Iterator[SchedulerFactory]:
    made: list[JobScheduler] = []

    def make(*jobs: Job, max_workers: int = JOB_THREADS) -> JobScheduler:
        scheduler = JobScheduler(jobs, max_workers=max_workers)
        made.append(scheduler)
        return scheduler

    yield make
    release.set()
    for scheduler in made:
        assert scheduler.stop(timeout=10)


def job(name: str, function: Callable[[], object], period: float = FAST, delay: float = 0) -> Job:
    return Job(name, period=period, initial_delay=delay, function=function, jitter=0)


def status_of(scheduler: JobScheduler, name: str) -> object:
    return next(status for status in scheduler.status() if status.name == name)


def test_job_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="period"):
        Job("x", period=0, initial_delay=0, function=lambda: None)
    with pytest.raises(ValueError, match="initial_delay"):
        Job("x", period=1, initial_delay=-1, function=lambda: None)
    with pytest.raises(ValueError, match="jitter"):
        Job("x", period=1, initial_delay=0, function=lambda: None, jitter=1.5)
    with pytest.raises(ValueError, match="duplicate job names: x"):
        JobScheduler([job("x", lambda: None), job("x", lambda: None)])


def test_default_jitter_is_five_percent() -> None:
    assert Job("x", period=60, initial_delay=60, function=lambda: None).jitter == 0.05
    rng = random.Random(7)
    samples = [jittered(60.0, 0.05, rng) for _ in range(2000)]
    assert 57.0 <= min(samples) < 57.5
    assert 62.5 < max(samples) <= 63.0


def test_periods_and_initial_delays_are_honoured(make_scheduler: SchedulerFactory) -> None:
    times: list[float] = []
    later: list[float] = []
    scheduler = make_scheduler(
        job("fast", lambda: times.append(time.monotonic())),
        job("later", lambda: later.append(time.monotonic()), delay=30),
    )
    started = time.monotonic()
    scheduler.start()
    time.sleep(0.6)
    scheduler.stop()
    assert 5 <= len(times) <= 14, times
    assert times[0] - started < 0.3  # initial delay 0: at once
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    assert gaps[len(gaps) // 2] == pytest.approx(FAST, abs=0.03)
    assert later == []  # its initial delay has not passed


def test_jitter_spreads_the_period() -> None:
    """Each run comes due one jittered period after the previous one: the timer's
    waits are periods drawn from its random source, within ±5% and not all the
    same. The timer is driven tick by tick on a clock of the test's own (each
    tick exactly when the job is due), so a loaded machine changes nothing."""
    now = 1000.0
    ran: list[float] = []
    scheduler = JobScheduler(
        [Job("j", period=60.0, initial_delay=0, function=lambda: ran.append(now))],
        rng=random.Random(11),
        clock=lambda: now,
    )
    draws = random.Random(11)
    try:
        waits = []
        for tick in range(20):
            waits.append(scheduler._tick())
            wait_until(lambda runs=tick + 1: scheduler.status()[0].runs == runs)
            now += waits[-1]
    finally:
        assert scheduler.stop(timeout=10)
    assert waits == pytest.approx([jittered(60.0, 0.05, draws) for _ in range(20)])
    assert all(57.0 <= wait <= 63.0 for wait in waits), waits
    assert max(waits) - min(waits) > 1.0  # spread, not one fixed period
    assert ran == pytest.approx([1000.0 + sum(waits[:i]) for i in range(20)])  # when due


def test_a_job_never_overlaps_itself(make_scheduler: SchedulerFactory) -> None:
    lock = threading.Lock()
    current = 0
    most = 0

    def slow() -> None:
        nonlocal current, most
        with lock:
            current += 1
            most = max(most, current)
        time.sleep(0.2)
        with lock:
            current -= 1

    scheduler = make_scheduler(job("slow", slow, period=0.02))
    scheduler.start()
    wait_until(lambda: scheduler.status()[0].runs >= 2)
    scheduler.stop()
    assert most == 1
    assert scheduler.status()[0].skipped >= 5  # due about every 0.02 s while running 0.2 s


def test_a_failing_run_is_logged_and_the_job_keeps_its_schedule(
    make_scheduler: SchedulerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="arbiter.jobs")
    calls = 0

    def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise ValueError(f"boom {calls}")
        return "fine"

    scheduler = make_scheduler(job("flaky", flaky))
    scheduler.start()
    wait_until(lambda: scheduler.status()[0].failures == 2)
    assert scheduler.status()[0].last_error in ("ValueError: boom 2", None)
    wait_until(lambda: scheduler.status()[0].runs >= 4)
    scheduler.stop()
    status = scheduler.status()[0]
    assert status.failures == 2
    assert status.last_error is None  # the last run succeeded
    failures = [r for r in caplog.records if r.getMessage() == "job flaky failed"]
    assert len(failures) == 2
    assert all(r.levelno == logging.ERROR and r.exc_info for r in failures)
    assert "ValueError: boom 1" in caplog.text  # the traceback is in the log
    assert "job flaky done: 'fine'" in caplog.text


def test_last_error_names_the_exception(make_scheduler: SchedulerFactory) -> None:
    def broken() -> None:
        raise RuntimeError("no database")

    scheduler = make_scheduler(job("broken", broken, delay=60))
    status = scheduler.run_now("broken").result(timeout=10)
    assert (status.runs, status.failures) == (1, 1)
    assert status.last_error == "RuntimeError: no database"
    assert status.last_duration is not None
    assert status.last_duration >= 0
    assert status.last_start is not None
    assert abs(status.last_start - time.time()) < 10


def test_stop_waits_for_running_jobs(make_scheduler: SchedulerFactory) -> None:
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.3)
        finished.set()

    scheduler = make_scheduler(job("slow", slow, period=60))
    scheduler.start()
    wait_until(lambda: scheduler.status()[0].running)
    assert scheduler.stop(timeout=10) is True
    assert finished.is_set()
    assert scheduler.status()[0].runs == 1


def test_stop_gives_up_after_its_timeout_and_is_idempotent(
    make_scheduler: SchedulerFactory, release: threading.Event
) -> None:
    scheduler = make_scheduler(job("stuck", lambda: release.wait(30), period=60))
    scheduler.start()
    wait_until(lambda: scheduler.status()[0].running)
    began = time.monotonic()
    assert scheduler.stop(timeout=0.1) is False
    assert time.monotonic() - began < 2
    release.set()
    assert scheduler.stop(timeout=10) is True  # a second stop waits again
    assert scheduler.stop(timeout=10) is True
    assert scheduler.status()[0].runs == 1


def test_stop_drops_runs_still_queued(
    make_scheduler: SchedulerFactory, release: threading.Event
) -> None:
    scheduler = make_scheduler(
        job("a", lambda: release.wait(30), period=60),
        job("b", lambda: release.wait(30), period=60),
        max_workers=1,
    )
    scheduler.start()
    wait_until(lambda: all(status.running for status in scheduler.status()))
    assert scheduler.stop(timeout=0.1) is False
    release.set()
    assert scheduler.stop(timeout=10) is True
    assert sorted(status.runs for status in scheduler.status()) == [0, 1]


def test_stop_without_start_and_no_restart(make_scheduler: SchedulerFactory) -> None:
    scheduler = make_scheduler(job("x", lambda: None))
    assert scheduler.stop() is True
    with pytest.raises(RuntimeError, match="cannot start again"):
        scheduler.start()
    with pytest.raises(RuntimeError, match="stopped"):
        scheduler.run_now("x")


def test_start_twice_starts_once(make_scheduler: SchedulerFactory) -> None:
    def timers() -> int:
        return sum(thread.name == "arbiter-scheduler" for thread in threading.enumerate())

    before = timers()
    scheduler = make_scheduler(job("x", lambda: None, period=60))
    scheduler.start()
    scheduler.start()
    assert timers() == before + 1
    scheduler.stop()
    assert timers() == before


def test_run_now_runs_outside_the_schedule(
    make_scheduler: SchedulerFactory, release: threading.Event
) -> None:
    scheduler = make_scheduler(
        job("hourly", lambda: 42, period=3600, delay=3600),
        job("blocked", lambda: release.wait(30), period=3600, delay=3600),
    )
    assert scheduler.status()[0].runs == 0
    assert scheduler.status()[0].last_start is None
    assert scheduler.run_now("hourly").result(timeout=10).runs == 1  # before start()
    scheduler.start()
    assert scheduler.run_now("hourly").result(timeout=10).runs == 2
    first = scheduler.run_now("blocked")
    assert scheduler.run_now("blocked") is first  # joins the run in progress
    release.set()
    assert first.result(timeout=10).runs == 1
    with pytest.raises(KeyError, match="nope"):
        scheduler.run_now("nope")


def test_jobs_run_in_the_job_executor_only(
    make_scheduler: SchedulerFactory, release: threading.Event
) -> None:
    names: set[str] = set()
    entered = threading.Semaphore(0)

    def record() -> None:
        names.add(threading.current_thread().name)
        entered.release()
        release.wait(30)

    jobs = [job(f"job{i}", record) for i in range(JOB_THREADS * 2)]
    scheduler = make_scheduler(*jobs)
    scheduler.start()
    for _ in range(JOB_THREADS):
        assert entered.acquire(timeout=10)
    time.sleep(0.2)  # room for a fifth thread, if the executor were unbounded
    assert len(names) == JOB_THREADS
    assert all(status.running for status in scheduler.status())  # the rest are queued
    release.set()
    wait_until(lambda: all(status.runs >= 1 for status in scheduler.status()))
    scheduler.stop()
    assert len(names) == JOB_THREADS
    assert all(name.startswith("arbiter-job_") for name in names), names


def test_queue_depth_counts_runs_waiting_for_a_job_thread(
    make_scheduler: SchedulerFactory, release: threading.Event
) -> None:
    scheduler = make_scheduler(
        job("a", lambda: release.wait(30), period=60),
        job("b", lambda: release.wait(30), period=60),
        max_workers=1,
    )
    assert scheduler.queue_depth() == 0
    scheduler.start()
    wait_until(lambda: all(status.running for status in scheduler.status()))
    assert scheduler.queue_depth() == 1  # one runs on the only thread, one waits
    release.set()
    wait_until(lambda: not any(status.running for status in scheduler.status()))
    assert scheduler.queue_depth() == 0


def test_an_unavailable_database_is_one_warning_line_not_a_traceback(
    make_scheduler: SchedulerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="arbiter.jobs")

    def needs_the_database() -> None:
        raise StorageUnavailable("connection refused")

    scheduler = make_scheduler(job("reader", needs_the_database, delay=60))
    status = scheduler.run_now("reader").result(timeout=10)
    scheduler.stop()
    assert status.failures == 1
    assert status.last_error == "StorageUnavailable: connection refused"
    (record,) = [r for r in caplog.records if r.getMessage().startswith("job reader")]
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert record.getMessage() == "job reader: database unavailable: connection refused"
