"""Persistence: small store interfaces (`base`), one SQL implementation (`sql`)
on SQLite and PostgreSQL, the schema and its migrations, the engines, the
primary's lease, backups and the object store.

The bottom layer: imports nothing of ours but the pure `telemetry` counters
and the stop rules' state types of the pure `stats` (a run's spec holds them);
the records it stores are its own (`records.py`, `run_spec.py`)."""

from arbiter.storage.errors import (
    DuplicateKey,
    QueryAbandoned,
    QueryTooLong,
    StorageError,
    StorageUnavailable,
)
from arbiter.storage.sql import Storage, Tx

__all__ = [
    "DuplicateKey",
    "QueryAbandoned",
    "QueryTooLong",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "Tx",
]
