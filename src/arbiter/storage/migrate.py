"""Schema migrations (Alembic), applied by `arbiter db upgrade` and at start-up.

The Alembic environment lives inside the package, so an installed `arbiter`
can migrate its database without a checkout or an alembic.ini.

Rolling upgrades follow expand, then contract. A revision that only adds
(a table, a nullable column, an index) and leaves every old query valid says
so with `EXPAND = True` in its module. After each upgrade the database records
the oldest code revision that can still use it (`schema_compatibility` in the
kv table): the newest revision below an unbroken run of expand revisions. Code
that finds a schema newer than its own (one it has no script for) may serve
as a secondary when that oldest revision is one it knows, so old secondaries
keep serving while the primary moves first. Removing or renaming (contract)
is a later revision without `EXPAND`, deployed once no old code runs.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

from arbiter.storage.sql_kv import SqlKVStore

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
COMPATIBILITY_KEY = "schema_compatibility"

SchemaState = Literal["current", "empty", "behind", "newer_compatible", "newer"]


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    current: str | None  # the database's revision
    head: str | None  # this code's
    state: SchemaState
    oldest_compatible: str | None = None  # what the database says (newer schemas)


def _config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["engine"] = engine
    return config


def _scripts() -> ScriptDirectory:
    return ScriptDirectory(str(MIGRATIONS_DIR))


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to `revision`, then record which code may use it.
    Runs in the threadpool (blocking I/O)."""
    command.upgrade(_config(engine), revision)
    current = current_revision(engine)
    with engine.begin() as connection:
        SqlKVStore(connection).set(
            COMPATIBILITY_KEY,
            {"revision": current, "oldest_compatible": oldest_compatible(current)},
        )


def oldest_compatible(revision: str | None) -> str | None:
    """The oldest revision whose code still works on `revision`'s schema: walk
    down while each revision is an expand."""
    scripts = _scripts()
    while revision is not None:
        script = scripts.get_revision(revision)
        if script is None or not getattr(script.module, "EXPAND", False):
            return revision
        down = script.down_revision
        revision = down if isinstance(down, str) else None
    return revision


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return _scripts().get_current_head()


def known_revisions() -> set[str]:
    return {script.revision for script in _scripts().walk_revisions()}


def is_up_to_date(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()


def schema_status(engine: Engine) -> SchemaStatus:
    """Where the database stands against this code. Blocking (threadpool)."""
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
        head = head_revision()
        if current == head:
            return SchemaStatus(current, head, "current")
        if current is None:
            return SchemaStatus(current, head, "empty")
        known = known_revisions()
        if current in known:
            return SchemaStatus(current, head, "behind")
        oldest = _recorded_oldest(connection)
        state: SchemaState = "newer_compatible" if oldest in known else "newer"
        return SchemaStatus(current, head, state, oldest)


def _recorded_oldest(connection: Connection) -> str | None:
    recorded = SqlKVStore(connection).get(COMPATIBILITY_KEY)
    value = recorded.get("oldest_compatible") if isinstance(recorded, dict) else None
    return value if isinstance(value, str) else None
