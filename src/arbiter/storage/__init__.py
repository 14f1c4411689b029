"""Persistence: small store interfaces (`base`), one SQL implementation (`sql`)."""

from arbiter.storage.errors import DuplicateKey, StorageError, StorageUnavailable
from arbiter.storage.sql import Storage, Tx

__all__ = ["DuplicateKey", "Storage", "StorageError", "StorageUnavailable", "Tx"]
