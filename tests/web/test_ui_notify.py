"""The bell and the notifications' JSON (web/ui/notify.py) in-process."""

from starlette.testclient import TestClient

from arbiter.storage.records import QuarantineRecord
from tests.web.runs_support import submit, users
from tests.web.support import csrf_of, log_in, state


def test_the_bell_follows_and_unfollows_and_returns_to_its_page(
    client: TestClient, repo_url: str
) -> None:
    alice, _ = users(client)
    run_id = submit(client, alice, repo_url)
    log_in(client, "root")
    token = csrf_of(client, "/tests")
    reply = client.post(
        f"/tests/view/{run_id}/follow",
        data={"csrf_token": token, "follow": "1", "next": "/tests/finished"},
        follow_redirects=False,
    )
    assert (reply.status_code, reply.headers["location"]) == (303, "/tests/finished")
    assert state(client).follows.followed("root") == {run_id}
    form = {"csrf_token": token, "follow": "0", "next": "https://elsewhere.example/"}
    reply = client.post(f"/tests/view/{run_id}/follow", data=form, follow_redirects=False)
    assert reply.headers["location"] == f"/tests/view/{run_id}"  # never off-site
    assert state(client).follows.followed("root") == set()
    missing = client.post(f"/tests/view/{'0' * 24}/follow", data=form, follow_redirects=False)
    assert missing.status_code == 404


def test_notifications_need_a_session_and_take_any_since(client: TestClient) -> None:
    assert client.get("/user/notifications").status_code == 401
    users(client)
    log_in(client, "root")
    for since in ("", "nan", "inf", "yesterday", "1" * 400, "12.5"):
        reply = client.get("/user/notifications", params={"since": since})
        assert reply.status_code == 200, since
        assert reply.json()["runs"] == []
        assert reply.headers["cache-control"] == "no-store"


def test_approvers_hear_of_quarantined_machines_others_do_not(client: TestClient) -> None:
    users(client)
    name = "alice-8cores-0badbad0"
    finding = {"run_id": "0" * 24, "author": "carol", "kind": "crashes", "detail": "12 crashes"}
    now = state(client).runs.context.clock()
    with state(client).storage.write() as tx:
        tx.quarantine.put(QuarantineRecord(name, True, now - 5, [finding] * 3, []))
    log_in(client, "alice")
    assert client.get("/user/notifications", params={"since": now - 60}).json()["machines"] == []
    log_in(client, "root")
    reply = client.get("/user/notifications", params={"since": now - 60}).json()
    assert reply["machines"] == [
        {
            "name": name,
            "reason": "crashes on 1 run",
            "url": f"/workers/{name}",
            "at": now - 5,
        }
    ]
    later = client.get("/user/notifications", params={"since": reply["now"]}).json()
    assert later["machines"] == []  # told once
