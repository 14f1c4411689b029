"""Nets and books pages: lists for everyone, uploads with errors beside the field."""

import hashlib

from starlette.testclient import TestClient

from arbiter.domain.run_args import DEFAULT_BOOK
from arbiter.runtime.settings import Settings
from arbiter.web.app import create_app
from tests.web.support import csrf_of, log_in, make_user

NET = b"NNUE" + bytes(range(256)) * 8
NET_NAME = f"nn-{hashlib.sha256(NET).hexdigest()[:12]}.nnue"


def logged_in(client: TestClient) -> str:
    make_user(client, "alice")
    log_in(client)
    return csrf_of(client, "/upload")


def test_lists_are_public(client: TestClient) -> None:
    assert "No nets uploaded yet." in client.get("/nns").text
    books = client.get("/books").text
    assert DEFAULT_BOOK in books
    assert f'href="/api/book/{DEFAULT_BOOK}"' in books


def test_upload_needs_a_login(client: TestClient) -> None:
    reply = client.get("/upload", follow_redirects=False)
    assert reply.status_code == 302
    assert reply.headers["location"] == "/login?next=/upload"


def test_a_net_uploads_and_is_listed(client: TestClient) -> None:
    token = logged_in(client)
    reply = client.post(
        "/upload",
        data={"csrf_token": token, "net_name": ""},
        files={"file": (NET_NAME, NET, "application/octet-stream")},
        follow_redirects=False,
    )
    assert reply.status_code == 303, reply.text
    page = client.get(reply.headers["location"]).text
    assert f"{NET_NAME} uploaded." in page
    assert f'href="/api/nn/{NET_NAME}"' in page
    assert client.get(f"/api/nn/{NET_NAME}").content == NET


def test_a_wrong_net_shows_the_error_beside_the_file(client: TestClient) -> None:
    token = logged_in(client)
    reply = client.post(
        "/upload",
        data={"csrf_token": token},
        files={"file": ("nn-000000000000.nnue", NET, "application/octet-stream")},
    )
    assert reply.status_code == 400
    assert 'id="net_file-error"' in reply.text
    assert f"it should be named {NET_NAME}" in reply.text
    assert "No nets uploaded yet." in client.get("/nns").text


def test_a_bad_book_shows_the_error_and_stores_nothing(client: TestClient) -> None:
    token = logged_in(client)
    reply = client.post(
        "/upload/book",
        data={"csrf_token": token, "book_name": "mine.epd"},
        files={"file": ("x.epd", b"not a position\n", "text/plain")},
    )
    assert reply.status_code == 400
    assert 'id="book_file-error"' in reply.text
    assert "mine.epd" not in client.get("/books").text


def test_a_book_uploads_under_the_given_name(client: TestClient) -> None:
    token = logged_in(client)
    epd = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
    reply = client.post(
        "/upload/book",
        data={"csrf_token": token, "book_name": "mine.epd"},
        files={"file": ("whatever.epd", epd, "text/plain")},
    )
    assert reply.status_code == 200  # followed the redirect
    assert "mine.epd uploaded." in reply.text


def test_uploads_refuse_a_missing_csrf_token(client: TestClient) -> None:
    logged_in(client)
    reply = client.post("/upload", files={"file": (NET_NAME, NET, "application/octet-stream")})
    assert reply.status_code == 403


def test_a_full_daily_quota_shows_beside_the_file(settings: Settings) -> None:
    with TestClient(create_app(settings.with_changes(upload_quota_files=1))) as client:
        token = logged_in(client)
        book = ("x.epd", b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n", "text/plain")
        first = client.post(
            "/upload/book", data={"csrf_token": token, "book_name": "one.epd"}, files={"file": book}
        )
        assert first.status_code == 200, first.text
        second = client.post(
            "/upload/book", data={"csrf_token": token, "book_name": "two.epd"}, files={"file": book}
        )
        assert second.status_code == 429
        assert 'id="book_file-error"' in second.text
        assert "uploaded 1 files in the last 24 hours" in second.text
        assert "two.epd" not in client.get("/books").text
