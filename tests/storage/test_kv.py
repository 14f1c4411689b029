"""The key/value store: small JSON documents by key."""

from typing import Any

import pytest

from arbiter.storage import Storage


def test_missing_key_reads_as_none(storage: Storage) -> None:
    with storage.read() as tx:
        assert tx.kv.get("absent") is None


@pytest.mark.parametrize(
    "value",
    [{"a": [1, 2, {"b": None}], "c": "é"}, [1, "two", 3.5], "text", 7, 0, 2.5, True, False],
)
def test_set_then_get_round_trips(storage: Storage, value: Any) -> None:
    with storage.write() as tx:
        tx.kv.set("key", value)
    with storage.read() as tx:
        assert tx.kv.get("key") == value


def test_set_overwrites(storage: Storage) -> None:
    with storage.write() as tx:
        tx.kv.set("key", {"version": 1})
    with storage.write() as tx:
        tx.kv.set("key", {"version": 2})
    with storage.read() as tx:
        assert tx.kv.get("key") == {"version": 2}


def test_keys_are_independent(storage: Storage) -> None:
    with storage.write() as tx:
        tx.kv.set("one", 1)
        tx.kv.set("two", 2)
        tx.kv.delete("one")
    with storage.read() as tx:
        assert tx.kv.get("one") is None
        assert tx.kv.get("two") == 2


def test_delete_reports_whether_the_key_existed(storage: Storage) -> None:
    with storage.write() as tx:
        tx.kv.set("key", "value")
        assert tx.kv.delete("key")
        assert not tx.kv.delete("key")
    with storage.read() as tx:
        assert tx.kv.get("key") is None


def test_none_is_refused(storage: Storage) -> None:
    with storage.write() as tx:
        tx.kv.set("key", "kept")
        with pytest.raises(ValueError, match="None"):
            tx.kv.set("key", None)
    with storage.read() as tx:
        assert tx.kv.get("key") == "kept"
