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
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Connection, Engine, inspect, text

from arbiter.storage.sql_kv import SqlKVStore

if TYPE_CHECKING:  # Alembic is imported only to migrate: 0.3 s of every start
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Every revision this code has a script for, oldest first: each script's file
# name starts with its revision id (a test holds this to Alembic's own list).
REVISIONS = tuple(
    sorted(path.name.partition("_")[0] for path in MIGRATIONS_DIR.glob("versions/[0-9]*_*.py"))
)
COMPATIBILITY_KEY = "schema_compatibility"

SchemaState = Literal["current", "empty", "behind", "newer_compatible", "newer"]


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    current: str | None  # the database's revision
    head: str | None  # this code's
    state: SchemaState
    oldest_compatible: str | None = None  # what the database says (newer schemas)


def _config(engine: Engine) -> "Config":
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["engine"] = engine
    return config


def _scripts() -> "ScriptDirectory":
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR))


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to `revision`, then record which code may use it.
    Runs in the threadpool (blocking I/O)."""
    from alembic import command

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
        return _recorded_revision(connection)


def _recorded_revision(connection: Connection) -> str | None:
    """The revision Alembic recorded in the database; None for an empty one."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def head_revision() -> str | None:
    return REVISIONS[-1] if REVISIONS else None


def known_revisions() -> set[str]:
    return set(REVISIONS)


def is_up_to_date(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()


def schema_status(engine: Engine) -> SchemaStatus:
    """Where the database stands against this code. Blocking (threadpool)."""
    with engine.connect() as connection:
        current = _recorded_revision(connection)
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
