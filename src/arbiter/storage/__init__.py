"""Persistence: small store interfaces (`base`), one SQL implementation (`sql`)."""

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
