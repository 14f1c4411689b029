"""`arbiter import fishtest` on the small dump, on both backends."""

import re
from pathlib import Path
from typing import Any

import bson
import pytest
from argon2 import PasswordHasher
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from sqlalchemy import Engine, select, text

from arbiter.cli import main
from arbiter.domain.actions import wire_id
from arbiter.domain.files.stored import NET, StoredFile, chunk_count, read_chunk
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from arbiter.storage.schema import metadata
from tests.importer import small_dump
from tests.importer.fishtest_dump import (
    CLEAR_PASSWORD,
    T0,
    base_args,
    oid,
    run,
    stats,
    task,
    write_collection,
)
from tests.importer.small_dump import (
    BAYES,
    DELETED,
    FAILED,
    LIVE_SPSA,
    NO_ARGS,
    OLD_FIXED,
    SPARSE,
    SPRT,
    SPSA,
    SPSA_FLIPS,
    STOPPED,
)


@pytest.fixture(autouse=True)
def _cheap_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARBITER_ARGON2_TIME_COST", "1")
    monkeypatch.setenv("ARBITER_ARGON2_MEMORY_KIB", "8")


def run_import(dump: Path, url: str, data: Path, *extra: str) -> int:
    return main(
        ["import", "fishtest", str(dump), "--database-url", url, "--data-dir", str(data), *extra]
    )


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (password hashes left out: each hash has its salt)."""
    found = {}
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            columns = [c for c in table.c if c.name != "password_hash"]
            rows = connection.execute(select(*columns).order_by(*table.primary_key.columns)).all()
            found[table.name] = [tuple(row) for row in rows]
    return found


def test_imports_every_kind_of_document(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = small_dump.build(tmp_path)
    assert run_import(dump, database_url, tmp_path / "data") == 0
    out = capsys.readouterr()
    assert "check: 8 finished runs" in out.out
    assert "0 differences" in out.out
    assert "skipped 1: no args" in out.out
    assert "name differs only in case from Alice" in out.out
    assert "deltas: not imported" in out.out
    assert "runs" in out.err  # the progress bar
    engine = make_engine(database_url, pool_size=1)
    try:
        storage = Storage(engine)
        _assert_runs(storage)
        _assert_users(storage, engine)
        _assert_others(storage, dump, tmp_path / "data")
    finally:
        engine.dispose()


def _assert_runs(storage: Storage) -> None:
    with storage.read() as tx:
        runs = {
            run.id: run
            for run in tx.runs.get_many(
                [SPRT, SPSA, LIVE_SPSA, STOPPED, DELETED, FAILED, BAYES, OLD_FIXED, SPARSE, NO_ARGS]
            )
        }
        sprt_tasks = tx.tasks.for_run(SPRT)
        live_tasks = tx.tasks.for_run(LIVE_SPSA)
        bayes_tasks = tx.tasks.for_run(BAYES)
        bad_copies = tx.kv.get(f"bad_tasks/{SPRT}")
    assert NO_ARGS not in runs
    assert len(runs) == 9
    sprt = runs[SPRT]
    assert (sprt.wins, sprt.losses, sprt.draws, sprt.pentanomial) == (
        118,
        82,
        200,
        (5, 41, 98, 45, 11),
    )
    assert sprt.is_green
    assert sprt.finished
    assert sprt.approver == "Bob"
    assert sprt.start_time == T0.timestamp()
    assert sprt.args.sprt["state"] == "accepted"
    assert [t.bad for t in sprt_tasks] == [False, True, False]
    assert sprt_tasks[0].worker_name == "worker1-4cores-abcd1234"
    assert sprt_tasks[0].remote_addr == "192.0.2.7"
    assert sprt_tasks[2].start == 400
    assert bad_copies[0]["task_id"] == 1
    assert bad_copies[0]["residual_color"] == "red"
    assert bad_copies[0]["stats"]["wins"] == 100
    assert bad_copies[0]["bad"] is True
    assert runs[SPSA].args.spsa["param_history"][1][0]["theta"] == 21.3
    live = runs[LIVE_SPSA]
    assert not live.finished
    assert live.workers == 1
    assert live.cores == 4
    assert live.args.allowed_archs
    assert all("avx2" in arch for arch in live.args.allowed_archs)
    assert live_tasks[0].active
    assert live_tasks[0].spsa_params == {
        "iter": 14,
        "packed_flips": SPSA_FLIPS.hex(),
    }
    assert runs[DELETED].deleted
    assert runs[FAILED].failed
    assert runs[FAILED].failures == 3
    assert runs[STOPPED].args.sprt["state"] == ""
    assert runs[STOPPED].finished
    bayes = runs[BAYES]
    assert bayes.pentanomial == (0, 0, 0, 0, 0)
    assert bayes.wins == 150
    assert bayes.approved
    assert bayes.args.sprt["batch_size"] == 1
    assert bayes.args.sprt["elo_model"] == "BayesElo"
    assert [t.start for t in bayes_tasks] == [0, 200]
    sparse = runs[SPARSE]
    assert sparse.tc_base == 60.0
    assert sparse.args.threads == 1
    assert sparse.total_games == 0


def _assert_users(storage: Storage, engine: Engine) -> None:
    with storage.read() as tx:
        users = {user.username: user for user in tx.users.list()}
    assert set(users) == {"Alice", "Bob", "pendingpat", "blockedbo", "oldtimer", "nopassword"}
    assert users["Bob"].is_approver
    assert not users["Alice"].is_approver
    assert users["pendingpat"].pending
    assert users["blockedbo"].blocked
    assert users["blockedbo"].machine_limit == 4
    assert users["oldtimer"].email == ""
    assert users["Alice"].email == "alice@example.org"
    hasher = PasswordHasher()
    assert users["Alice"].password_hash.startswith("$argon2id$")
    assert hasher.verify(users["Alice"].password_hash, CLEAR_PASSWORD)
    with storage.read() as tx:
        assert tx.tokens.list_for_user(users["Alice"].id) == []  # no worker token invented
    # The clear password is nowhere in the database.
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for row in connection.execute(select(table)):
                assert CLEAR_PASSWORD not in repr(tuple(row)), table.name


def _assert_others(storage: Storage, dump: Path, data: Path) -> None:
    with storage.read() as tx:
        actions = list(reversed(tx.actions.query(_all_actions())))
        net = tx.nets.get(small_dump.net_with_file(dump))
        bare_net = tx.nets.get(small_dump.NET_WITHOUT_FILE)
        pgn = tx.pgns.get(SPRT, 0)
        blocked = tx.worker_blocks.list_blocked()
        legacy = tx.kv.get("fishtest/legacy_usernames")
    # Oldest first; the action without a time has its ObjectId's (T0), before the rest.
    expected = [oid(207)] + [oid(200 + n) for n in (1, 2, 3, 4, 5, 6, 8)]
    assert [wire_id(action) for action in actions] == [str(o) for o in expected]
    by_name = {a.action: a for a in actions}
    assert by_name["upload_nn"].data == {"nn": "nn-00000000beef.nnue"}
    assert by_name["failed_task"].task_id == 0
    assert by_name["failed_task"].run_id == SPRT
    assert by_name["ancient_event"].data == {"data": {"x": 1}}
    assert net is not None
    assert net.is_master
    assert net.downloads == 12
    assert net.size > 0
    stored = b"".join(
        read_chunk(storage, StoredFile(NET, net.name, net.size, net.sha256), seq)
        for seq in range(chunk_count(net.size))
    )
    assert stored == (dump / "nn" / net.name).read_bytes()
    assert bare_net is not None
    assert bare_net.size == 0
    assert pgn is not None
    assert pgn.startswith(b"\x1f\x8b")
    assert [(b.worker_name, b.message) for b in blocked] == [
        ("worker1-4cores-abcd1234", "bad results")
    ]
    assert legacy == ["Old Timer"]


def _all_actions() -> Any:
    from arbiter.storage.base import ActionFilter

    return ActionFilter(max_count=100)


def documents(dump: Path, name: str) -> list[dict[str, Any]]:
    return bson.decode_all((dump / "fishtest_new" / f"{name}.bson").read_bytes())


def test_a_second_import_changes_nothing(tmp_path: Path, database_url: str) -> None:
    dump = small_dump.build(tmp_path)
    assert run_import(dump, database_url, tmp_path / "data") == 0
    engine = make_engine(database_url, pool_size=1)
    try:
        first = snapshot(engine)
        with engine.connect() as connection:
            hashes = connection.execute(text("SELECT password_hash FROM users ORDER BY id")).all()
        assert run_import(dump, database_url, tmp_path / "data") == 0
        assert snapshot(engine) == first
        with engine.connect() as connection:
            assert (
                connection.execute(text("SELECT password_hash FROM users ORDER BY id")).all()
                == hashes
            )
    finally:
        engine.dispose()


def test_an_interrupted_import_continues_where_it_stopped(
    tmp_path: Path, database_url: str, sqlite_template: Path
) -> None:
    from arbiter.importer.dump import find_collections
    from arbiter.importer.fishtest import FishtestImport, ImportOptions
    from arbiter.importer.progress import Progress

    dump = small_dump.build(tmp_path)
    engine = make_engine(database_url, pool_size=1)
    try:
        storage = Storage(engine)
        files = find_collections(dump)

        def importer(stop: int | None) -> FishtestImport:
            options = ImportOptions(
                nets_dir=dump / "nn", batch_documents=2, stop_after_batches=stop
            )
            return FishtestImport(
                storage,
                files,
                hasher=PasswordHasher(time_cost=1, memory_cost=8, parallelism=1),
                options=options,
                progress=Progress(),
            )

        importer(5).run()  # users (4 batches), then one batch of runs
        with storage.read() as tx:
            assert tx.imports.counts()["runs"] == 2
            assert tx.imports.counts()["actions"] == 0
        importer(2).run()
        last = importer(None).run()
        resumed = snapshot(engine)
    finally:
        engine.dispose()
    # The same dump imported in one go into another database.
    straight_dir = tmp_path / "straight"
    straight_dir.mkdir()
    straight = straight_dir / "arbiter.sqlite3"
    straight.write_bytes(sqlite_template.read_bytes())
    assert run_import(dump, f"sqlite:///{straight}", tmp_path / "data2") == 0
    other = make_engine(f"sqlite:///{straight}", pool_size=1)
    try:
        expected = snapshot(other)
    finally:
        other.dispose()
    # The progress markers differ (the dump's fingerprint, the batches' counts).
    for rows in (resumed, expected):
        rows["kv"] = [row for row in rows["kv"] if not row[0].startswith("import/")]
    assert resumed == expected
    # Each collection was read once in all: a resume that read its file from the
    # start again would count documents twice (the rows alone cannot show it:
    # a row stored twice is stored once).
    in_dump = {name: len(documents(dump, name)) for name in ("users", "runs", "actions")}
    read = {c.name: c.documents for c in last.collections if c.name in in_dump}
    assert read == in_dump
    assert any(row[0] == f"bad_tasks/{SPRT}" for row in resumed["kv"])


def test_a_target_with_data_is_refused_unless_merging(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = small_dump.build(tmp_path)
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO users (username, username_key, email, password_hash,"
                    " registration_time, pending, blocked, is_approver, tests_repo,"
                    " machine_limit, credentials_version)"
                    " VALUES ('alice', 'alice', '', 'x', 0, false, false, false, '', 16, 0)"
                )
            )
        assert run_import(dump, database_url, tmp_path / "data") == 2
        assert "not empty (1 users)" in capsys.readouterr().err
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 0
        assert run_import(dump, database_url, tmp_path / "data", "--merge") == 0
        assert "name differs only in case from alice (e.g. Alice)" in capsys.readouterr().out
        with engine.connect() as connection:
            names = (
                connection.execute(text("SELECT username FROM users ORDER BY username"))
                .scalars()
                .all()
            )
            assert (
                connection.execute(
                    text("SELECT password_hash FROM users WHERE username = 'alice'")
                ).scalar()
                == "x"
            )
        assert "Alice" not in names  # the stored alice keeps her account
    finally:
        engine.dispose()


def test_an_overlapping_dump_merges_in_what_is_new_and_keeps_what_is_stored(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second dump that shares runs and users with the first (changed since)
    and brings new ones: merged, the new ones are added and the stored ones kept
    as they were, without a refusal or a skip."""
    first = small_dump.build(tmp_path / "first")
    assert run_import(first, database_url, tmp_path / "data") == 0
    alone = re.search(r"runs: (\d+) imported, (\d+) skipped", capsys.readouterr().out)
    assert alone is not None
    imported, skipped = (int(count) for count in alone.groups())
    second = small_dump.build(tmp_path / "second")
    db = second / "fishtest_new"
    runs = documents(second, "runs")
    for document in runs:
        if isinstance(document.get("args"), dict):  # one run of the dump has none
            document["args"]["info"] = "changed in the later dump"
    newcomer = run(60, base_args(info="only in the later dump"), [task(0, stats(1, 1, 0, None))])
    write_collection(db, "runs", [*runs, newcomer])
    users = documents(second, "users")
    for user in users:
        user["email"] = "changed@example.org"
    carol = {**users[0], "_id": oid(160), "username": "Carol", "email": "carol@example.org"}
    write_collection(db, "users", [*users, carol])
    assert run_import(second, database_url, tmp_path / "data", "--merge") == 0
    out = capsys.readouterr().out
    assert "refused by the database" not in out
    assert f"runs: {imported + 1} imported, {skipped} skipped" in out
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as connection:
            infos = dict(connection.execute(text("SELECT id, args FROM runs")).all())
            emails = dict(connection.execute(text("SELECT username, email FROM users")).all())
    finally:
        engine.dispose()
    assert len(infos) == imported + 1
    assert sum("changed in the later dump" in str(args) for args in infos.values()) == 0
    assert "only in the later dump" in str(infos[str(newcomer["_id"])])
    assert emails["Alice"] == "alice@example.org"  # the stored account, untouched
    assert emails["Carol"] == "carol@example.org"


def test_differences_are_listed(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = small_dump.build(tmp_path)
    runs = dump / "fishtest_new" / "runs.bson"
    import bson

    with runs.open("rb") as file:
        documents = list(bson.decode_file_iter(file))
    documents[0]["args"]["sprt"]["llr"] += 1e-6
    write_collection(runs.parent, "runs", documents)
    assert run_import(dump, database_url, tmp_path / "data") == 1
    out = capsys.readouterr().out
    assert "1 differences" in out
    assert f"{SPRT} llr: dump" in out


def test_a_gzipped_dump_imports_the_same(tmp_path: Path, sqlite_database_url: str) -> None:
    dump = small_dump.build(tmp_path, gzipped=True)
    assert sorted(p.name for p in (dump / "fishtest_new").glob("*.gz"))[0] == "actions.bson.gz"
    assert run_import(dump, sqlite_database_url, tmp_path / "data") == 0
    engine = make_engine(sqlite_database_url, pool_size=1)
    try:
        rows = snapshot(engine)
    finally:
        engine.dispose()
    assert len(rows["runs"]) == 10
    assert len(rows["actions"]) == 8
    assert len(rows["users"]) == 6


def test_a_truncated_file_is_imported_up_to_where_it_breaks(
    tmp_path: Path, sqlite_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = small_dump.build(tmp_path)
    actions = dump / "fishtest_new" / "actions.bson"
    actions.write_bytes(actions.read_bytes()[:-10])
    assert run_import(dump, sqlite_database_url, tmp_path / "data") == 0
    out = capsys.readouterr().out
    assert "actions: 7 imported, 0 skipped; stopped: not BSON after byte" in out


def test_the_check_lists_a_run_whose_stored_counts_differ_from_the_dump(
    tmp_path: Path, database_url: str
) -> None:
    from arbiter.importer.check import check_import
    from arbiter.importer.dump import find_collections

    dump = small_dump.build(tmp_path)
    assert run_import(dump, database_url, tmp_path / "data", "--no-check") == 0
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"UPDATE runs SET wins = wins + 7 WHERE id = '{OLD_FIXED}'"))
            connection.execute(text(f"UPDATE runs SET draws = draws + 7 WHERE id = '{BAYES}'"))
        files = find_collections(dump)
        report = check_import(Storage(engine), files["runs"], files["actions"])
    finally:
        engine.dispose()
    differing = {(d.run_id, d.quantity) for d in report.differences}
    assert differing == {
        *((OLD_FIXED, quantity) for quantity in ("elo", "ci_low", "ci_high", "los")),
        *((BAYES, quantity) for quantity in ("elo", "ci_low", "ci_high", "los", "llr")),
    }
    assert report.runs == 8


def test_documents_the_database_refuses_are_skipped_alone(
    tmp_path: Path, postgres_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """PostgreSQL refuses a NUL character in text: the batch is written again one
    action at a time, and only the refused one is skipped, with the reason."""
    db = tmp_path / "dump" / "fishtest_new"
    actions = [
        {"_id": oid(900 + n), "time": T0.timestamp() + n, "action": "log_message",
         "username": "Alice", "message": "with a \x00 NUL" if n == 2 else f"message {n}"}
        for n in range(5)
    ]  # fmt: skip
    write_collection(db, "actions", actions)
    assert run_import(tmp_path / "dump", postgres_database_url, tmp_path / "data") == 0
    out = capsys.readouterr().out
    assert "actions: 4 imported, 1 skipped" in out
    assert "refused by the database: " in out
    assert str(oid(902)) in out
    engine = make_engine(postgres_database_url, pool_size=1)
    try:
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT message FROM actions ORDER BY id")).scalars()
            assert list(stored) == ["message 0", "message 1", "message 3", "message 4"]
    finally:
        engine.dispose()


def test_names_signup_refuses_and_documents_of_any_shape_are_reported_not_fatal(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Accounts whose names signup would refuse are skipped; Int64 and Decimal128
    numbers anywhere in a run import as numbers; a run of a shape no rule
    foresaw is reported and skipped, and a second run of the import (a
    resume) neither stops there nor changes anything."""
    db = tmp_path / "dump" / "fishtest_new"
    users = [
        {"_id": oid(300 + n), "username": name, "password": CLEAR_PASSWORD}
        for n, name in enumerate(["Alice", "\u0410lice", "<i>x</i>", "a\nb", "../../../etc"])
    ]
    users.append({"_id": oid(310), "username": "Alice\x00evil", "groups": ["group:approvers"]})
    write_collection(db, "users", users)
    numbers = run(
        400,
        base_args(num_games=Int64(400), threads=Int64(1), throughput=Decimal128("100")),
        [task(0, stats(Int64(100), 80, Int64(20), [Int64(1), 40, 100, 50, Int64(9)]))],
        total_games=Int64(200),
    )
    odd = {**run(401, base_args(), [task(0, stats(1, 1, 1, None))]), "tasks": 5}
    write_collection(db, "runs", [numbers, odd])
    dump = tmp_path / "dump"
    differences = 1  # the exit status that asks the operator to look at the report
    assert run_import(dump, database_url, tmp_path / "data") == differences
    out = capsys.readouterr().out
    assert "1 finished runs not imported (see skipped)" in out
    assert "users: 1 imported, 5 skipped" in out
    assert "username breaks signup's rule (2 to 32 letters and digits)" in out
    assert "runs: 1 imported, 1 skipped" in out
    assert "unreadable (TypeError" in out
    assert str(oid(401)) in out
    engine = make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as connection:
            names = connection.execute(text("SELECT username FROM users")).scalars().all()
        storage = Storage(engine)
        with storage.read() as tx:
            (imported,) = tx.runs.get_many([str(oid(400))])
        before = snapshot(engine)
        assert run_import(dump, database_url, tmp_path / "data") == differences
        assert snapshot(engine) == before
    finally:
        engine.dispose()
    assert names == ["Alice"]
    assert (imported.wins, imported.draws, imported.pentanomial) == (100, 20, (1, 40, 100, 50, 9))
    assert imported.args.num_games == 400
    assert imported.args.throughput == 100
