"""The migrations produce exactly the schema the code declares, on both backends."""

import json

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, select, text

from arbiter.storage import run_search
from arbiter.storage.migrate import head_revision, is_up_to_date, upgrade
from arbiter.storage.records import evolve
from arbiter.storage.run_spec import RunSpec, spec_document
from arbiter.storage.schema import metadata


def test_fresh_database_is_at_head(engine: Engine) -> None:
    assert head_revision() is not None
    assert is_up_to_date(engine)


def test_migrations_match_declared_schema(engine: Engine) -> None:
    with engine.connect() as connection:
        options = {"compare_type": False, "include_name": _declared}
        context = MigrationContext.configure(connection, opts=options)
        differences = compare_metadata(context, metadata)
    assert differences == []


def _declared(name: str | None, kind: str, parents: object) -> bool:
    """Everything but the text index of run_words, which each backend builds in
    its own way (storage/run_search.py) and the declared schema leaves out."""
    return not (name or "").startswith(tuple(run_search.UNDECLARED))


def test_upgrade_twice_is_harmless(engine: Engine) -> None:
    upgrade(engine)
    assert is_up_to_date(engine)


def test_sqlite_runs_in_wal_mode(sqlite_database_url: str) -> None:
    from arbiter.storage.engine import make_engine

    engine = make_engine(sqlite_database_url)
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 30_000
    engine.dispose()


def test_0002_strips_the_sri_prefix_of_stored_books(engine: Engine) -> None:
    from alembic import command

    from arbiter.storage.migrate import _config
    from arbiter.storage.schema import books

    row = {"name": "a.epd", "username": "u", "sri": "A" * 64, "size": 1, "total": 1}
    with engine.begin() as connection:
        connection.execute(books.insert().values(**row, uploaded_at=0.0))
    command.downgrade(_config(engine), "0001")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT sri FROM books")).scalar() == "sha384-" + "A" * 64
    upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT sri FROM books")).scalar() == "A" * 64


def test_0008_moves_the_results_history_out_of_the_args(engine: Engine) -> None:
    """The last stored point followed the results: the run's totals stand for it now."""
    from alembic import command

    from arbiter.domain.runs.documents import new_run_record
    from arbiter.storage import Storage
    from arbiter.storage.migrate import _config
    from arbiter.storage.schema import runs

    points = [[2, 0, 0, 2, 0, 0, 1, 0, 0, None], [4, 0, 0, 4, 0, 0, 2, 0, 0, None]]
    spec = RunSpec(tc="10+0.1", new_tc="10+0.1", threads=1, num_games=100)
    # Stored by code of revision 0007: the history inside the args, a key the spec
    # does not know, which it keeps as it came.
    old_spec = evolve(spec, extra={"results_history": {"step": 2, "points": points}})
    with Storage(engine).write() as tx:
        tx.runs.add(new_run_record("0" * 24, "alice", old_spec, 0.0))
        tx.runs.add(new_run_record("1" * 24, "alice", spec, 0.0))  # no history: left alone
    command.downgrade(_config(engine), "0007")
    upgrade(engine)
    with engine.connect() as connection:
        query = select(runs.c.args, runs.c.results_history).order_by(runs.c.id)
        row, untouched = connection.execute(query).all()
    assert row.args == spec
    assert row.results_history == {"step": 2, "points": points[:1]}
    assert (untouched.args, untouched.results_history) == (spec, None)
    command.downgrade(_config(engine), "0007")
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT args FROM runs ORDER BY id")).scalar()
    moved_back = stored if isinstance(stored, dict) else json.loads(stored)
    history = {"step": 2, "points": points[:1]}
    assert moved_back == {**spec_document(spec), "results_history": history}
    upgrade(engine)


def test_0014_fills_the_terms_from_the_stored_words(engine: Engine) -> None:
    from alembic import command

    from arbiter.domain.runs.documents import new_run_record
    from arbiter.storage import Storage
    from arbiter.storage.migrate import _config
    from arbiter.storage.schema import run_terms

    with Storage(engine).write() as tx:
        spec = RunSpec(tc="10+0.1", info="Tune king", new_tag="a1")
        tx.runs.add(new_run_record("0" * 24, "alice", spec, 0.0))
    command.downgrade(_config(engine), "0013")
    upgrade(engine)
    with engine.connect() as connection:
        terms = connection.execute(select(run_terms.c.term).order_by(run_terms.c.term)).scalars()
        assert list(terms) == ["a1", "alice", "king", "tune"]


def test_the_revisions_named_by_file_are_alembics_chain() -> None:
    """Start-up reads the revisions from the scripts' file names, without Alembic."""
    from arbiter.storage.migrate import REVISIONS, _scripts

    chain = [script.revision for script in _scripts().walk_revisions()]
    assert tuple(reversed(chain)) == REVISIONS
    assert head_revision() == _scripts().get_current_head()
