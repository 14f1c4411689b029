"""Helpers for web tests (importable; fixtures live in conftest.py)."""

import html
import json
import re

import altcha
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
    return csrf_in(client.get(page).text)


def csrf_in(text: str) -> str:
    marker = 'name="csrf_token" value="'
    start = text.index(marker) + len(marker)
    return text[start : text.index('"', start)]


def solved_proof(text: str) -> str:
    """The signup page's proof-of-work challenge solved (by ALTCHA's own solver)
    into what the form sends; "" when the page asks for none."""
    found = re.search(r'data-pow-challenge="([^"]*)"', text)
    if found is None:
        return ""
    challenge = altcha.Challenge.from_dict(json.loads(html.unescape(found.group(1))))
    solution = altcha.solve_challenge(challenge)
    assert solution is not None
    return altcha.Payload(challenge, solution).to_base64()


def signup_form(client: TestClient, **fields: str) -> dict[str, str]:
    """`fields` with the signup page's CSRF token and its solved proof of work."""
    text = client.get("/signup").text
    return {"csrf_token": csrf_in(text), "altcha": solved_proof(text), **fields}


def log_in(
    client: TestClient, name: str = "alice", password: str = STRONG_PASSWORD, remember: bool = True
) -> None:
    form = {"username": name, "password": password, "csrf_token": csrf_of(client)}
    if remember:
        form["remember"] = "on"
    response = client.post("/login", data=form, follow_redirects=False)
    assert response.status_code == 303, response.text
