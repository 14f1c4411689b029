"""Alembic environment: the engine is handed over by `arbiter.storage.migrate`."""

from alembic import context

from arbiter.storage.engine import write_transaction
from arbiter.storage.schema import metadata

engine = context.config.attributes["engine"]

# One write transaction for the whole upgrade: on SQLite this takes the write
# lock up front, so two processes starting at once migrate one after the other.
with write_transaction(engine) as connection:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    context.run_migrations()
