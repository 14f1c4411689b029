"""Signup, approval, login, logout, sessions and CSRF through the pages."""

from starlette.testclient import TestClient

from arbiter.storage.base import ActionFilter
from tests.web.support import STRONG_PASSWORD, csrf_of, log_in, make_user, signup_form, state


def signup(client: TestClient, name: str = "bob", **overrides: str) -> object:
    fields = {
        "username": name,
        "email": f"{name}@example.org",
        "password": STRONG_PASSWORD,
        "password2": STRONG_PASSWORD,
        "tests_repo": "",
    }
    form = signup_form(client, **{**fields, **overrides})
    return client.post("/signup", data=form, follow_redirects=False)


def test_signup_creates_a_pending_account(client: TestClient) -> None:
    reply = signup(client)
    assert reply.status_code == 303  # type: ignore[attr-defined]
    user = state(client).accounts.get_user("bob")
    assert user is not None
    assert user.pending


def test_signup_error_is_shown_beside_its_field(client: TestClient) -> None:
    reply = signup(client, password="password", password2="password")
    assert reply.status_code == 400  # type: ignore[attr-defined]
    html = reply.text  # type: ignore[attr-defined]
    assert 'id="password-error"' in html
    assert state(client).accounts.get_user("bob") is None


def test_a_signup_without_its_proof_of_work_is_refused_beside_it(client: TestClient) -> None:
    for sent in ("", "forged"):
        reply = signup(client, altcha=sent)
        assert reply.status_code == 400  # type: ignore[attr-defined]
        assert 'id="proof-error"' in reply.text  # type: ignore[attr-defined]
        assert "data-pow-challenge=" in reply.text  # type: ignore[attr-defined]  # a new one
    assert state(client).accounts.get_user("bob") is None


def test_signup_mismatched_passwords(client: TestClient) -> None:
    reply = signup(client, password2="something else entirely 99")
    assert reply.status_code == 400  # type: ignore[attr-defined]
    assert 'id="password2-error"' in reply.text  # type: ignore[attr-defined]


def test_pending_user_cannot_log_in_until_accepted(client: TestClient) -> None:
    make_user(client, "root", approver=True)
    signup(client)
    form = {"username": "bob", "password": STRONG_PASSWORD, "csrf_token": csrf_of(client)}
    refused = client.post("/login", data=form, follow_redirects=False)
    assert refused.status_code == 401
    assert "pending approval" in refused.text
    state(client).accounts.accept("root", "bob")
    log_in(client, "bob")
    assert "bob" in client.get("/user").text


def test_wrong_password_is_refused_with_a_message(client: TestClient) -> None:
    make_user(client)
    form = {"username": "alice", "password": "nope", "csrf_token": csrf_of(client)}
    reply = client.post("/login", data=form)
    assert reply.status_code == 401
    assert "Invalid username or password." in reply.text


def test_login_without_csrf_token_is_forbidden(client: TestClient) -> None:
    make_user(client)
    reply = client.post("/login", data={"username": "alice", "password": STRONG_PASSWORD})
    assert reply.status_code == 403
    assert state(client).accounts.list_tokens("alice") == []


def test_login_with_foreign_csrf_token_is_forbidden(client: TestClient) -> None:
    make_user(client)
    form = {"username": "alice", "password": STRONG_PASSWORD, "csrf_token": "0" * 64}
    assert client.post("/login", data=form).status_code == 403


def test_remember_me_sets_a_persistent_cookie(client: TestClient) -> None:
    make_user(client)
    form = {
        "username": "alice",
        "password": STRONG_PASSWORD,
        "csrf_token": csrf_of(client),
        "remember": "on",
    }
    reply = client.post("/login", data=form, follow_redirects=False)
    cookie = next(
        v for k, v in reply.headers.multi_items() if k == "set-cookie" and "arbiter_session" in v
    )
    assert "Max-Age=34560000" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie


def test_session_without_remember_me_is_a_browser_session(client: TestClient) -> None:
    make_user(client)
    form = {"username": "alice", "password": STRONG_PASSWORD, "csrf_token": csrf_of(client)}
    reply = client.post("/login", data=form, follow_redirects=False)
    cookie = next(
        v for k, v in reply.headers.multi_items() if k == "set-cookie" and "arbiter_session" in v
    )
    assert "Max-Age" not in cookie


def test_login_redirects_only_to_local_paths(client: TestClient) -> None:
    make_user(client)
    form = {
        "username": "alice",
        "password": STRONG_PASSWORD,
        "csrf_token": csrf_of(client),
        "next": "//evil.example/x",
    }
    reply = client.post("/login", data=form, follow_redirects=False)
    assert reply.headers["location"] == "/tests"


def test_logout_ends_the_server_side_session(client: TestClient) -> None:
    make_user(client)
    log_in(client)
    stolen = client.cookies.get("arbiter_session")
    client.post("/logout", data={"csrf_token": csrf_of(client, "/user")}, follow_redirects=False)
    client.cookies.set("arbiter_session", stolen or "")
    reply = client.get("/user", follow_redirects=False)
    assert reply.status_code == 302
    assert reply.headers["location"].startswith("/login")


def test_blocking_ends_the_users_sessions(client: TestClient) -> None:
    make_user(client, "root", approver=True)
    make_user(client)
    log_in(client)
    state(client).accounts.set_blocked("root", "alice", True)
    reply = client.get("/tests", follow_redirects=False)
    assert reply.status_code == 302
    assert reply.headers["location"] == "/login?next=/tests"
    follow = client.get("/login")
    assert "Your session has ended" in follow.text


def test_password_change_keeps_this_session_and_ends_others(
    client: TestClient, settings: object
) -> None:
    make_user(client)
    log_in(client)
    other = TestClient(client.app, base_url="http://testserver")
    log_in(other)
    new_password = "another quite long passphrase 4242"
    form = {
        "old_password": STRONG_PASSWORD,
        "new_password": new_password,
        "new_password2": new_password,
        "csrf_token": csrf_of(client, "/user"),
    }
    assert client.post("/user/password", data=form, follow_redirects=False).status_code == 303
    assert client.get("/user", follow_redirects=False).status_code == 200
    assert other.get("/user", follow_redirects=False).status_code == 302


def test_profile_requires_login(client: TestClient) -> None:
    reply = client.get("/user", follow_redirects=False)
    assert reply.status_code == 302
    assert reply.headers["location"] == "/login?next=/user"


def test_token_is_shown_once_and_can_be_revoked(client: TestClient) -> None:
    make_user(client)
    log_in(client)
    form = {"label": "box1", "current_password": STRONG_PASSWORD}
    reply = client.post("/user/tokens", data={**form, "csrf_token": csrf_of(client, "/user")})
    assert reply.status_code == 200
    assert "shown only once" in reply.text
    [token] = state(client).accounts.list_tokens("alice")
    assert token.label == "box1"
    revoke = client.post(
        f"/user/tokens/{token.id}/revoke", data={"csrf_token": csrf_of(client, "/user")}
    )
    assert revoke.status_code == 200
    assert state(client).accounts.list_tokens("alice")[0].revoked


def test_approver_accepts_from_user_management(client: TestClient) -> None:
    make_user(client, "root", approver=True)
    signup(client)
    log_in(client, "root")
    page = client.get("/user_management")
    assert "bob" in page.text
    token = csrf_of(client, "/user_management")
    reply = client.post(
        "/user_management/bob/accept", data={"csrf_token": token}, follow_redirects=False
    )
    assert reply.status_code == 303
    user = state(client).accounts.get_user("bob")
    assert user is not None
    assert not user.pending
    actions = state(client).actions.list(ActionFilter(action="accept_user"))
    assert len(actions) == 1


def test_user_management_is_for_approvers_only(client: TestClient) -> None:
    make_user(client)
    log_in(client)
    assert client.get("/user_management").status_code == 403
    token = csrf_of(client, "/user")
    assert (
        client.post("/user_management/alice/block", data={"csrf_token": token}).status_code == 403
    )


def test_authenticated_pages_are_not_stored(client: TestClient) -> None:
    make_user(client)
    log_in(client)
    assert client.get("/user").headers["cache-control"] == "no-store"
