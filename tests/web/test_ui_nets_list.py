"""The nets page: first and last test, master's nets, filters and paging (both backends)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from arbiter.storage.records import NetRecord
from tests.web.api_support import api_client, api_settings
from tests.web.support import state


@pytest.fixture
def client(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    with api_client(api_settings(tmp_path, database_url), monkeypatch) as test_client:
        with state(test_client).storage.write() as tx:
            for n in range(60):
                owner = "alice" if n % 2 else "Bob"
                name = f"nn-{n:012x}.nnue"
                tx.nets.add(NetRecord(name, owner, "0" * 64, 1, float(n), 0, n < 3, None, None))
            first = {"run_id": "a" * 24, "username": "alice", "time": 1.0}
            last = {"run_id": "b" * 24, "username": "carol", "time": 2.0}
            tx.nets.mark_tested("nn-000000000005.nnue", first, master=False)
            tx.nets.mark_tested("nn-000000000005.nnue", last, master=True)
        yield test_client


def names(page: str) -> list[str]:
    return [part.split('"')[0] for part in page.split('href="/api/nn/')[1:]]


def test_pages_newest_first(client: TestClient) -> None:
    first = client.get("/nns").text
    assert "60 nets" in first
    assert names(first)[0] == "nn-00000000003b.nnue"
    assert len(names(first)) == 50
    assert "page 1 of 2" in first
    assert 'href="/nns?page=2" rel="next"' in first
    second = client.get("/nns?page=2").text
    assert names(second) == [f"nn-{n:012x}.nnue" for n in range(9, -1, -1)]


def test_first_and_last_test_and_master(client: TestClient) -> None:
    page = client.get("/nns?name=000000000005").text
    assert names(page) == ["nn-000000000005.nnue"]
    assert f'<a href="/tests/view/{"a" * 24}">aaaaaaaa</a> alice' in page
    assert f'<a href="/tests/view/{"b" * 24}">bbbbbbbb</a> carol' in page
    assert '<span class="badge">master</span>' in page  # marked by the second test


def test_filters(client: TestClient) -> None:
    master = names(client.get("/nns?master=1").text)
    assert master == [f"nn-{n:012x}.nnue" for n in (5, 2, 1, 0)]
    bobs = client.get("/nns?user=bob&page=1").text
    assert "30 nets" in bobs  # uploader matched in any case
    assert all(int(name[3:15], 16) % 2 == 0 for name in names(bobs))
    assert "No net matches these filters." in client.get("/nns?name=zz%25").text
