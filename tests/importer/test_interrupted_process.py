"""An import killed with SIGKILL in the middle of the runs continues where its
last committed batch ended, and ends as an import that was never stopped."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import text

from arbiter.storage.engine import make_engine
from tests.importer.fishtest_dump import base_args, oid, run, stats, task, write_collection
from tests.importer.test_fishtest import run_import, snapshot

RUNS = 6000


def _dump(directory: Path) -> Path:
    db = directory / "dump" / "fishtest_new"
    documents = (
        {**run(n, base_args(new_tag=f"p{n}"), [task(0, stats(60, 40, 100, [2, 20, 50, 22, 6]))]),
         "_id": oid(n)}
        for n in range(1, RUNS + 1)
    )  # fmt: skip
    write_collection(db, "runs", documents)
    return db.parent


def _runs_marker(url: str) -> bool:
    """True once a batch of runs committed and the runs are not all in."""
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            count = connection.execute(text("SELECT count(*) FROM runs")).scalar_one()
    finally:
        engine.dispose()
    return 0 < count < RUNS


def test_a_killed_import_continues_after_its_last_batch(
    tmp_path: Path, sqlite_database_url: str, sqlite_template: Path
) -> None:
    dump = _dump(tmp_path)
    command = [sys.executable, "-m", "arbiter", "import", "fishtest", str(dump)]
    command += ["--database-url", sqlite_database_url, "--data-dir", str(tmp_path / "data")]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not _runs_marker(sqlite_database_url):
            assert child.poll() is None, "the import ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert run_import(dump, sqlite_database_url, tmp_path / "data") == 0
    straight = tmp_path / "straight" / "arbiter.sqlite3"
    straight.parent.mkdir()
    straight.write_bytes(sqlite_template.read_bytes())
    assert run_import(dump, f"sqlite:///{straight}", tmp_path / "data2") == 0
    rows = []
    for url in (sqlite_database_url, f"sqlite:///{straight}"):
        engine = make_engine(url, pool_size=1)
        try:
            found = snapshot(engine)
        finally:
            engine.dispose()
        found["kv"] = [row for row in found["kv"] if not row[0].startswith("import/")]
        rows.append(found)
    assert len(rows[0]["runs"]) == RUNS
    assert rows[0] == rows[1]
