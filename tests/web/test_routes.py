"""The route table is the contract deployed workers and bookmarks depend on."""

from starlette.routing import Mount, Route

from arbiter.protocol import WORKER_PATHS
from arbiter.web.routes import routes

EXPECTED = {
    ("/api/request_version", "POST"),
    ("/api/calc_elo", "GET"),
    ("/", "GET"),
    ("/tests", "GET"),
    ("/login", "GET"),
    ("/login", "POST"),
    ("/logout", "POST"),
    ("/signup", "GET"),
    ("/signup", "POST"),
    ("/user", "GET"),
    ("/user/password", "POST"),
    ("/user/profile", "POST"),
    ("/user/tokens", "POST"),
    ("/user/tokens/{token_id:int}/revoke", "POST"),
    ("/user_management", "GET"),
    ("/user_management/{username}/accept", "POST"),
    ("/user_management/{username}/reject", "POST"),
    ("/user_management/{username}/block", "POST"),
    ("/user_management/{username}/unblock", "POST"),
}


def route_table() -> set[tuple[str, str]]:
    table = set()
    for route in routes():
        if isinstance(route, Route):
            table |= {(route.path, method) for method in route.methods or () if method != "HEAD"}
    return table


def test_route_table_is_pinned() -> None:
    assert route_table() == EXPECTED


def test_static_files_are_mounted() -> None:
    assert any(isinstance(route, Mount) and route.path == "/static" for route in routes())


def test_routed_worker_endpoints_are_post_only() -> None:
    for path, method in route_table():
        if path in WORKER_PATHS:
            assert method == "POST"
