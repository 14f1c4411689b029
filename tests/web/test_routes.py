"""The route table is the contract deployed workers and bookmarks depend on."""

from starlette.routing import Mount, Route

from arbiter.protocol import WORKER_PATHS
from arbiter.web.routes import MONITORING_PATHS, routes

EXPECTED = {
    ("/api/request_version", "POST"),
    ("/api/request_task", "POST"),
    ("/api/update_task", "POST"),
    ("/api/beat", "POST"),
    ("/api/request_spsa", "POST"),
    ("/api/failed_task", "POST"),
    ("/api/stop_run", "POST"),
    ("/api/upload_pgn", "POST"),
    ("/api/worker_log", "POST"),
    ("/api/runs", "POST"),
    ("/api/runs/{run_id}/approve", "POST"),
    ("/api/runs/{run_id}/stop", "POST"),
    ("/api/runs/{run_id}/modify", "POST"),
    ("/api/runs/{run_id}/purge", "POST"),
    ("/api/runs/{run_id}/delete", "POST"),
    ("/api/calc_elo", "GET"),
    ("/api/rate_limit", "GET"),
    ("/favicon.ico", "GET"),
    ("/api/active_runs", "GET"),
    ("/api/finished_runs", "GET"),
    ("/api/actions", "POST"),
    ("/api/get_run/{run_id}", "GET"),
    ("/api/get_task/{run_id}/{task_id}", "GET"),
    ("/api/get_elo/{run_id}", "GET"),
    ("/nns", "GET"),
    ("/books", "GET"),
    ("/upload", "GET"),
    ("/upload", "POST"),
    ("/upload/book", "POST"),
    ("/api/upload_net", "POST"),
    ("/api/upload_book", "POST"),
    ("/api/pgn/{name}", "GET"),
    ("/api/run_pgns/{name}", "GET"),
    ("/api/nns", "GET"),
    ("/api/nn/{name}", "GET"),
    ("/api/books", "GET"),
    ("/api/book/{name}", "GET"),
    ("/api/worker/package.json", "GET"),
    ("/api/worker/package", "GET"),
    ("/api/worker/{filename}", "GET"),
    ("/healthz", "GET"),
    ("/readyz", "GET"),
    ("/metrics", "GET"),
    ("/", "GET"),
    ("/tests", "GET"),
    ("/tests/finished", "GET"),
    ("/tests/view/{run_id}/follow", "POST"),
    ("/user/notifications", "GET"),
    ("/user/webhooks", "POST"),
    ("/user/webhooks/{hook_id:int}/delete", "POST"),
    ("/tests/user/{username}", "GET"),
    ("/tests/view/{run_id}", "GET"),
    ("/tests/run", "GET"),
    ("/tests/run", "POST"),
    ("/tests/view/{run_id}/approve", "POST"),
    ("/tests/view/{run_id}/stop", "POST"),
    ("/tests/view/{run_id}/purge", "POST"),
    ("/tests/view/{run_id}/delete", "POST"),
    ("/tests/view/{run_id}/modify", "POST"),
    ("/tests/stats/{run_id}", "GET"),
    ("/tests/live_elo/{run_id}", "GET"),
    ("/actions", "GET"),
    ("/contributors", "GET"),
    ("/contributors/monthly", "GET"),
    ("/machines", "GET"),
    ("/workers", "GET"),
    ("/workers/{worker_name}", "GET"),
    ("/workers/{worker_name}", "POST"),
    ("/workers/{worker_name}/release", "POST"),
    ("/workers/{worker_name}/purge", "POST"),
    ("/sprt_calc", "GET"),
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


def test_every_worker_endpoint_is_routed() -> None:
    assert {(path, "POST") for path in WORKER_PATHS} <= route_table()


def test_routed_worker_endpoints_are_post_only() -> None:
    for path, method in route_table():
        if path in WORKER_PATHS:
            assert method == "POST"


def test_monitoring_paths_are_routed() -> None:
    paths = {route.path for route in routes() if isinstance(route, Route)}
    assert set(MONITORING_PATHS) <= paths
