"""Unknown routes: JSON under /api/, an HTML page elsewhere."""

from starlette.testclient import TestClient


def test_unknown_api_route_is_json_404(client: TestClient) -> None:
    reply = client.get("/api/no_such_thing")
    assert reply.status_code == 404
    assert reply.headers["content-type"] == "application/json"
    payload = reply.json()
    assert payload["error"] == "/api/no_such_thing: no such API endpoint"
    assert "duration" in payload


def test_unknown_page_is_html_404(client: TestClient) -> None:
    reply = client.get("/no/such/page")
    assert reply.status_code == 404
    assert reply.headers["content-type"].startswith("text/html")
    assert "Page not found" in reply.text


def test_static_files_are_served(client: TestClient) -> None:
    reply = client.get("/static/style.css")
    assert reply.status_code == 200
    assert "text/css" in reply.headers["content-type"]
