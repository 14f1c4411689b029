"""Expensive test fixtures built once per run, not once per test process:
pytest-xdist runs a session fixture in each of its workers, and a worker
environment or a wheelhouse takes seconds to build. The directory comes from
the `shared_dir` fixture (tests/conftest.py)."""

import contextlib
import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def built_once(directory: Path) -> Iterator[bool]:
    """Build `directory` once for the whole run, whichever test process asks
    first: yields True to the one that must build it (the others wait on the
    lock, then get False), and marks it built when that block ends well."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with (directory.parent / f"{directory.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = directory.parent / f"{directory.name}.built"
        if done.exists():
            yield False
            return
        if directory.exists():
            shutil.rmtree(directory)  # a build that failed half-way
        yield True
        done.touch()
