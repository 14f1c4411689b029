"""Bare mirrors of the repositories runs test, under `<data dir>/git-cache`.

One mirror per repository URL (named by a hash of it), shared by every run of
that repository. A mirror is used under its lock: a thread lock within the
process, an `flock` between processes on this machine, and the storage's
repository lock (`storage/repo_locks.py`: an advisory lock on PostgreSQL)
between processes on other machines, so two submissions never fetch one
repository at once; the second finds the first one's commits and fetches
nothing. Waits are bounded by `lock_seconds`.

The cache is capped at `max_bytes`: after a fetch, mirrors are evicted least
recently used first (a `used` stamp file's mtime, touched on every use) until
the total fits; a mirror in use (its flock taken) is never evicted.

Blocking: git threads only.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from arbiter.domain.repos.runner import GitFailed, run_git
from arbiter.storage.repo_locks import NoRepoLocks, RepoLocks, RepoLockTimeout

USED_STAMP = "arbiter-used"
_POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Mirror:
    path: Path
    key: str


class RepoCache:
    def __init__(
        self,
        root: Path,
        *,
        max_bytes: int,
        lock_seconds: float = 60.0,
        local_seconds: float = 60.0,
        shared_locks: RepoLocks | None = None,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.lock_seconds = lock_seconds
        self.local_seconds = local_seconds
        self._shared = shared_locks or NoRepoLocks()
        self._mutex = threading.Lock()
        self._thread_locks: dict[str, threading.Lock] = {}

    @staticmethod
    def key_of(url: str) -> str:
        return hashlib.sha256(url.encode()).hexdigest()[:24]

    @contextlib.contextmanager
    def using(self, url: str) -> Iterator[Mirror]:
        """The mirror of `url`, created if new, held under its locks; eviction after."""
        key = self.key_of(url)
        mirror = Mirror(self.root / f"{key}.git", key)
        deadline = time.monotonic() + self.lock_seconds
        with self._thread_lock(key, deadline), self._file_lock(key, deadline):
            try:
                with self._shared.hold(key, max(0.1, deadline - time.monotonic())):
                    self._prepare(mirror)
                    yield mirror
            except RepoLockTimeout:
                raise GitFailed("another process held the repository's lock too long") from None
            finally:
                _touch(mirror.path / USED_STAMP)
        self.evict(keep=key)

    def mirrors(self) -> list[Path]:
        return sorted(self.root.glob("*.git")) if self.root.exists() else []

    def size(self) -> int:
        return sum(_tree_size(path) for path in self.mirrors())

    def evict(self, keep: str = "") -> list[str]:
        """Remove least recently used mirrors (not `keep`, none in use) until under the cap."""
        sizes = {path: _tree_size(path) for path in self.mirrors()}
        total = sum(sizes.values())
        removed = []
        for path in sorted(sizes, key=_last_used):
            if total <= self.max_bytes:
                break
            key = path.name.removesuffix(".git")
            if key == keep:
                continue
            with self._try_file_lock(key) as locked:
                if locked:
                    shutil.rmtree(path, ignore_errors=True)
                    total -= sizes[path]
                    removed.append(key)
        return removed

    def _prepare(self, mirror: Mirror) -> None:
        if (mirror.path / "HEAD").exists():
            return
        shutil.rmtree(mirror.path, ignore_errors=True)  # a creation cut short
        self.root.mkdir(parents=True, exist_ok=True)
        run_git(["init", "--quiet", "--bare", str(mirror.path)], timeout=self.local_seconds)

    @contextlib.contextmanager
    def _thread_lock(self, key: str, deadline: float) -> Iterator[None]:
        with self._mutex:
            lock = self._thread_locks.setdefault(key, threading.Lock())
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise GitFailed("the repository was busy for too long")
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def _file_lock(self, key: str, deadline: float) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise GitFailed("the repository was busy for too long") from None
                    time.sleep(_POLL_SECONDS)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    @contextlib.contextmanager
    def _try_file_lock(self, key: str) -> Iterator[bool]:
        fd = os.open(self.root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):  # an evicted or half-made mirror
        path.touch()


def _last_used(path: Path) -> float:
    try:
        return (path / USED_STAMP).stat().st_mtime
    except OSError:
        return 0.0


def _tree_size(path: Path) -> int:
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(directory) / name).lstat().st_size
    return total
