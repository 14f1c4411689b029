"""Helpers for web tests (importable; fixtures live in conftest.py)."""

from starlette.testclient import TestClient

from arbiter.domain.accounts import User
from arbiter.runtime.state import AppState

STRONG_PASSWORD = "correct horse battery staple 1729"


def state(client: TestClient) -> AppState:
    app_state: AppState = client.app.state.arbiter  # type: ignore[attr-defined]
    return app_state


def make_user(client: TestClient, name: str = "alice", *, approver: bool = False) -> User:
    return state(client).accounts.create_user(
        name, STRONG_PASSWORD, email=f"{name}@example.org", approver=approver
    )


def csrf_of(client: TestClient, page: str = "/login") -> str:
    """The CSRF token the page's forms carry."""
    html = client.get(page).text
    marker = 'name="csrf_token" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


def log_in(
    client: TestClient, name: str = "alice", password: str = STRONG_PASSWORD, remember: bool = True
) -> None:
    form = {"username": name, "password": password, "csrf_token": csrf_of(client)}
    if remember:
        form["remember"] = "on"
    response = client.post("/login", data=form, follow_redirects=False)
    assert response.status_code == 303, response.text
