"""The job scheduler: periodic background work, in its own bounded executor.

Rule 4 of the design: background work never occupies the request threadpool
(seed 004: jobs sharing the pool starve logins). So two kinds of threads, and
none of anyio's:

- the timer thread (`arbiter-scheduler`) decides when a job is due and hands
  it to the executor; it never runs job code;
- the job executor (`arbiter-job_N`, at most JOB_THREADS threads) runs jobs.

A job never overlaps itself: when it comes due while its previous run is still
running (or queued behind busy executor threads), that tick is skipped, so the
executor's queue never holds more than one run per job. A run that raises is
logged with its traceback and the job keeps its schedule. Periods carry a
jitter (±5% by default, as the reference scheduler) so jobs do not align.
"""

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from arbiter.storage import StorageUnavailable

log = logging.getLogger("arbiter.jobs")

JOB_THREADS = 4
THREAD_PREFIX = "arbiter-job"
TIMER_THREAD_NAME = "arbiter-scheduler"
DEFAULT_JITTER = 0.05
STOP_TIMEOUT = 10.0
_IDLE_WAIT = 3600.0  # how long the timer sleeps when there are no jobs at all


@dataclass(frozen=True, slots=True)
class Job:
    """A plain function run every `period` seconds (± `jitter` of it), first
    after `initial_delay` seconds. Its return value is only logged (debug)."""

    name: str
    period: float
    initial_delay: float
    function: Callable[[], object]
    jitter: float = DEFAULT_JITTER

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a job needs a name")
        if self.period <= 0:
            raise ValueError(f"job {self.name}: period must be positive")
        if self.initial_delay < 0:
            raise ValueError(f"job {self.name}: initial_delay must not be negative")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"job {self.name}: jitter must be in [0, 1)")


@dataclass(frozen=True, slots=True)
class JobStatus:
    """One job as operators see it. Times are Unix seconds; durations seconds."""

    name: str
    period: float
    running: bool  # running, or queued behind busy executor threads
    runs: int  # finished runs, successful or not
    failures: int
    skipped: int  # ticks skipped because the previous run had not finished
    last_start: float | None
    last_duration: float | None
    last_error: str | None  # of the last finished run; None when it succeeded


def jittered(seconds: float, fraction: float, rng: random.Random) -> float:
    """`seconds` scaled by a uniform factor in [1 - fraction, 1 + fraction]."""
    return seconds * (1.0 + rng.uniform(-fraction, fraction))


@dataclass(slots=True)
class _Slot:
    """One job's schedule and statistics; guarded by the scheduler's lock."""

    job: Job
    next_due: float = 0.0  # time.monotonic()
    future: "Future[JobStatus] | None" = None
    runs: int = 0
    failures: int = 0
    skipped: int = 0
    last_start: float | None = None
    last_duration: float | None = None
    last_error: str | None = None

    def busy(self) -> bool:
        return self.future is not None and not self.future.done()

    def status(self, *, running: bool) -> JobStatus:
        return JobStatus(
            name=self.job.name,
            period=self.job.period,
            running=running,
            runs=self.runs,
            failures=self.failures,
            skipped=self.skipped,
            last_start=self.last_start,
            last_duration=self.last_duration,
            last_error=self.last_error,
        )


class JobScheduler:
    """Runs a table of jobs on a timer thread and a bounded executor of its own.

    Lifecycle: `start()` once, `stop()` once or more. `run_now()` works before
    `start()` too (tests and operators), never after `stop()`.
    """

    def __init__(
        self,
        jobs: Iterable[Job],
        *,
        max_workers: int = JOB_THREADS,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`rng` and `clock` (a monotonic one) are for tests: with them, when jobs
        come due does not depend on how busy the machine is."""
        table = list(jobs)
        names = [job.name for job in table]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate job names: {', '.join(duplicates)}")
        self._slots = {job.name: _Slot(job) for job in table}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._timer: threading.Thread | None = None
        self._rng = rng or random.Random()  # noqa: S311 - spreads timers; nothing secret
        self._clock = clock
        # Threads are created on demand, up to max_workers, and live in no pool of anyio's.
        self._executor = ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix=THREAD_PREFIX
        )

    # --- lifecycle [caller's thread] ---

    def start(self) -> None:
        """Schedule every job after its (jittered) initial delay and start the
        timer thread. Returns at once; a second call does nothing."""
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("a stopped job scheduler cannot start again")
            if self._timer is not None:
                return
            now = self._clock()
            for slot in self._slots.values():
                slot.next_due = now + jittered(slot.job.initial_delay, slot.job.jitter, self._rng)
            self._timer = threading.Thread(
                target=self._timer_loop, name=TIMER_THREAD_NAME, daemon=True
            )
            self._timer.start()
        log.info("job scheduler started: %s", ", ".join(self._slots) or "no jobs")

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Stop scheduling, drop runs still queued, and wait up to `timeout`
        seconds for the running ones. Blocks. True when no job is left running.
        Idempotent: a later call only waits again."""
        with self._lock:
            first_call = not self._stopping.is_set()
            self._stopping.set()  # the timer and run_now submit nothing from here on
            timer = self._timer
        if timer is not None:
            timer.join(timeout)
        self._executor.shutdown(wait=False, cancel_futures=True)
        # Only runs already started are left: `wait` would never count a
        # future cancelled by the shutdown above as done, so leave those out.
        with self._lock:
            running = {
                slot.future: name
                for name, slot in self._slots.items()
                if slot.future is not None and not slot.future.done()
            }
        _, unfinished = wait(running, timeout=timeout)
        if unfinished:
            still = ", ".join(sorted(running[future] for future in unfinished))
            log.warning("jobs still running after %.1f s: %s", timeout, still)
        elif first_call:
            log.info("job scheduler stopped")
        return not unfinished

    # --- operators and tests [any thread] ---

    def run_now(self, name: str) -> "Future[JobStatus]":
        """Run the job at once in the executor, outside its schedule (which is
        unchanged); if it is already running, the future of that run. Returns
        at once; the future's result is the job's status after the run (it is
        cancelled if `stop()` drops the run before it started)."""
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("the job scheduler is stopped")
            slot = self._slots.get(name)
            if slot is None:
                raise KeyError(f"no job named {name!r}")
            if slot.future is not None and not slot.future.done():
                return slot.future
            return self._submit(slot)

    def queue_depth(self) -> int:
        """Job runs submitted and waiting for an executor thread."""
        with self._lock:
            return sum(
                1
                for slot in self._slots.values()
                if slot.future is not None and not slot.future.running() and slot.busy()
            )

    def status(self) -> list[JobStatus]:
        """A snapshot of every job, in table order."""
        with self._lock:
            return [slot.status(running=slot.busy()) for slot in self._slots.values()]

    # --- the timer thread ---

    def _timer_loop(self) -> None:
        """[timer thread] Launch due jobs, then sleep until the next is due or stop()."""
        while not self._stopping.is_set():
            self._stopping.wait(self._tick())

    def _tick(self) -> float:
        """[timer thread] Launch every due job; seconds until the next is due."""
        now = self._clock()
        with self._lock:
            if self._stopping.is_set():
                return 0.0
            for slot in self._slots.values():
                if slot.next_due <= now:
                    self._launch_due(slot, now)
            next_due = min((slot.next_due for slot in self._slots.values()), default=None)
        return _IDLE_WAIT if next_due is None else max(0.0, next_due - now)

    def _launch_due(self, slot: _Slot, now: float) -> None:
        """[timer thread, lock held] Reschedule the job and submit it unless it is busy."""
        period = jittered(slot.job.period, slot.job.jitter, self._rng)
        slot.next_due += period
        if slot.next_due <= now:  # fell behind (a stalled process): no burst of catch-up runs
            slot.next_due = now + period
        if slot.busy():
            slot.skipped += 1
            log.debug("job %s is still running: tick skipped", slot.job.name)
            return
        self._submit(slot)

    def _submit(self, slot: _Slot) -> "Future[JobStatus]":
        """[lock held] Queue one run of the job on the executor."""
        future = self._executor.submit(self._execute, slot)
        slot.future = future
        return future

    # --- the job executor ---

    def _execute(self, slot: _Slot) -> JobStatus:
        """[job executor] One run: call the function, record how it went."""
        job = slot.job
        with self._lock:
            slot.last_start = time.time()
        started = time.monotonic()
        error = _call(job)
        duration = time.monotonic() - started
        with self._lock:
            slot.runs += 1
            slot.last_duration = duration
            slot.last_error = error
            if error is not None:
                slot.failures += 1
            return slot.status(running=False)


def _call(job: Job) -> str | None:
    """[job executor] Call the job's function; its error as text, or None."""
    try:
        result = job.function()
    except StorageUnavailable as error:
        # Expected while the database restarts: the job runs again at its next
        # time. One line, as for a request (a traceback reads as a bug).
        log.warning("job %s: database unavailable: %s", job.name, error)
        return f"{type(error).__name__}: {error}"
    except Exception as error:
        log.exception("job %s failed", job.name)
        return f"{type(error).__name__}: {error}"
    log.debug("job %s done: %r", job.name, result)
    return None
