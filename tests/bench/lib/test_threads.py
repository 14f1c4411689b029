"""A server's CPU by thread (bench/lib/threads.py), read from this very process."""

import os
import threading
import time

from bench.lib import threads
from bench.lib.threads import ThreadCpu


def busy(cpu_seconds: float) -> None:
    """Spend this much CPU in the calling thread, however long a loaded machine
    takes to give it (a wall-clock loop could get almost none)."""
    end = time.thread_time() + cpu_seconds
    while time.thread_time() < end:
        sum(range(1000))


def test_each_threads_cpu_is_read_and_a_new_thread_counts_from_zero() -> None:
    before = threads.thread_cpu(os.getpid())
    worker = threading.Thread(target=busy, args=(0.3,))
    worker.start()
    worker.join()  # gone from /proc once joined: read one that lives instead
    busy(0.3)
    after = threads.thread_cpu(os.getpid())
    spent = threads.spent(before, after)
    assert os.getpid() in spent  # the main thread's id is the process's
    assert spent[os.getpid()].total > 0.1
    assert all(cpu.user >= 0 and cpu.system >= 0 for cpu in spent.values())
    late = threads.spent({}, {7: ThreadCpu(1.0, 0.5)})
    assert late == {7: ThreadCpu(1.0, 0.5)}


def test_threads_are_named_by_their_python_names() -> None:
    stop = threading.Event()
    probe = threading.Thread(target=stop.wait, name="bench-probe")
    probe.start()
    try:
        names = threads.thread_names(os.getpid())
    finally:
        stop.set()
        probe.join()
    assert names[os.getpid()] == "MainThread"
    assert names[probe.native_id] == "bench-probe"  # type: ignore[index]


def test_the_report_line_gives_shares_with_their_user_and_system_parts() -> None:
    spent = {
        1: ThreadCpu(5.0, 1.0),
        2: ThreadCpu(2.5, 1.0),
        3: ThreadCpu(0.0, 0.4),
        4: ThreadCpu(0.06, 0.0),
        5: ThreadCpu(0.04, 0.0),
    }
    names = {1: "MainThread", 2: "arbiter-results"}
    assert threads.describe(spent, names) == (
        "- Server CPU by thread (shares of the window's server CPU):"
        " event loop 60% (user 50, system 10); arbiter-results 35% (user 25, system 10);"
        " thread 3 4% (user 0, system 4); others 1%."
    )
    assert threads.describe({}, {}) == "- Server CPU by thread: not measured."
