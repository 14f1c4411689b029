"""Key/value JSON documents on SQL."""

from typing import Any

from sqlalchemy import Connection, delete, select

from arbiter.storage.schema import kv
from arbiter.storage.sql_common import upsert


class SqlKVStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, key: str) -> Any:
        return self._connection.execute(select(kv.c.value).where(kv.c.key == key)).scalar()

    def set(self, key: str, value: Any) -> None:
        if value is None:
            # NULL and "absent" would be indistinguishable through get().
            raise ValueError("kv values may not be None; delete the key instead")
        upsert(self._connection, kv, {"key": key}, {"value": value})

    def delete(self, key: str) -> bool:
        return self._connection.execute(delete(kv).where(kv.c.key == key)).rowcount == 1
