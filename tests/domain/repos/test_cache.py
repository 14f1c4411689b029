"""The mirror cache: LRU eviction under the size cap, a mirror in use is kept,
and the advisory lock keeps two processes of one PostgreSQL database from
fetching one repository at once."""

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from arbiter.domain.repos.cache import USED_STAMP, RepoCache
from arbiter.domain.repos.reading import CodeReader
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow
from arbiter.storage.repo_locks import RepoLockTimeout, repo_locks
from tests.domain.repos.support import commit, git


def repository(root: Path, name: str, size: int) -> str:
    repo = root / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "master")
    commit(repo, "base", {"blob.bin": os.urandom(size).hex()})
    git(repo, "checkout", "-q", "-b", "patch")
    commit(repo, "patch", {"other.txt": "x\n"})
    return repo.as_uri()


def test_least_recently_used_mirrors_are_evicted(tmp_path: Path) -> None:
    urls = [repository(tmp_path / "src", name, 200_000) for name in ("a", "b", "c")]
    cache = RepoCache(tmp_path / "cache", max_bytes=10**9)
    read = CodeReader(RepoPolicy(parse_allow("file")), cache)
    for url in urls:
        read.read(url, "master", "patch")
    one = cache.size() // 3
    assert one > 200_000
    # a is the oldest; using it again makes b the least recently used.
    stamp = cache.root / f"{cache.key_of(urls[0])}.git" / USED_STAMP
    read.read(urls[0], "master", "patch")
    assert (
        stamp.stat().st_mtime
        >= (cache.root / f"{cache.key_of(urls[2])}.git" / USED_STAMP).stat().st_mtime
    )
    cache.max_bytes = int(one * 2.5)
    assert cache.evict() == [cache.key_of(urls[1])]
    assert {p.name for p in cache.mirrors()} == {
        f"{cache.key_of(u)}.git" for u in (urls[0], urls[2])
    }
    assert cache.size() <= cache.max_bytes


def test_eviction_happens_after_each_use_and_spares_mirrors_in_use(tmp_path: Path) -> None:
    urls = [repository(tmp_path / "src", name, 200_000) for name in ("a", "b")]
    cache = RepoCache(tmp_path / "cache", max_bytes=10**9)
    read = CodeReader(RepoPolicy(parse_allow("file")), cache)
    read.read(urls[0], "master", "patch")
    cache.max_bytes = 1  # everything is over the cap now
    key_a = cache.key_of(urls[0])
    fd = os.open(cache.root / f"{key_a}.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is using a
    try:
        read.read(urls[1], "master", "patch")
        assert {p.name for p in cache.mirrors()} == {f"{key_a}.git", f"{cache.key_of(urls[1])}.git"}
    finally:
        os.close(fd)
    cache.evict(keep=cache.key_of(urls[1]))
    assert [p.name for p in cache.mirrors()] == [f"{cache.key_of(urls[1])}.git"]


def test_advisory_lock_keeps_one_fetch_per_repository(database_url: str) -> None:
    locks = repo_locks(database_url)
    if database_url.startswith("sqlite"):
        with locks.hold("k", 0.1), locks.hold("k", 0.1):
            pass  # one machine: the cache's flock does the work
        return
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with locks.hold("repo-key", 5):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with pytest.raises(RepoLockTimeout), locks.hold("repo-key", 0.3):
            pass
        assert 0.25 < time.monotonic() - started < 5
        with locks.hold("another-repo", 1):
            pass  # other repositories are not held up
    finally:
        release.set()
        thread.join()
    with locks.hold("repo-key", 1):
        pass  # free again once its holder let go
