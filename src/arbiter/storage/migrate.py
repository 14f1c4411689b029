"""Schema migrations (Alembic), applied by `arbiter db upgrade` and at start-up.

The Alembic environment lives inside the package, so an installed `arbiter`
can migrate its database without a checkout or an alembic.ini.
"""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to `revision`. Runs in the threadpool (blocking I/O)."""
    command.upgrade(_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def is_up_to_date(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()
