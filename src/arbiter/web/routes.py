"""The whole URL map, API and pages, in one table (pinned by tests/web/test_routes.py).

Worker endpoints are in `arbiter.protocol.WORKER_PATHS`; a test checks that
each one is routed here.
"""

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from arbiter.domain.files.pgns import MAX_PGN_UPLOAD_BODY
from arbiter.web import api, files_api, health, runs_api, worker_api
from arbiter.web.templating import STATIC_DIR
from arbiter.web.ui import (
    accounts,
    files,
    finished,
    fleet,
    home,
    new_run,
    notify,
    run_actions,
    run_stats,
    runs,
    tools,
    users,
)

# Paths whose bodies may be as large as ARBITER_MAX_UPLOAD_BYTES (nets).
UPLOAD_PATHS: tuple[str, ...] = ("/upload", "/api/upload_net", "/api/upload_book")
# Health and monitoring: JSON and Prometheus text, not pages (web/health.py).
MONITORING_PATHS: tuple[str, ...] = ("/healthz", "/readyz", "/metrics")
# Exact paths with a limit of their own.
PATH_BODY_LIMITS = {"/api/upload_pgn": MAX_PGN_UPLOAD_BODY}


def routes() -> list[BaseRoute]:
    return [
        # Worker protocol (POST, JSON body with credentials)
        Route("/api/request_version", api.request_version, methods=["POST"]),
        Route("/api/request_task", worker_api.request_task, methods=["POST"]),
        Route("/api/update_task", worker_api.update_task, methods=["POST"]),
        Route("/api/beat", worker_api.beat, methods=["POST"]),
        Route("/api/request_spsa", worker_api.request_spsa, methods=["POST"]),
        Route("/api/failed_task", worker_api.failed_task, methods=["POST"]),
        Route("/api/stop_run", worker_api.stop_run, methods=["POST"]),
        Route("/api/upload_pgn", worker_api.upload_pgn, methods=["POST"]),
        Route("/api/worker_log", worker_api.worker_log, methods=["POST"]),
        # Scripting: runs, with Authorization: Bearer <token>
        Route("/api/runs", runs_api.submit_run, methods=["POST"]),
        Route("/api/runs/{run_id}/approve", runs_api.approve_run, methods=["POST"]),
        Route("/api/runs/{run_id}/stop", runs_api.stop_run, methods=["POST"]),
        Route("/api/runs/{run_id}/modify", runs_api.modify_run, methods=["POST"]),
        Route("/api/runs/{run_id}/purge", runs_api.purge_run, methods=["POST"]),
        Route("/api/runs/{run_id}/delete", runs_api.delete_run, methods=["POST"]),
        # Files: uploads with a bearer token, downloads public
        Route("/api/upload_net", files_api.upload_net, methods=["POST"]),
        Route("/api/upload_book", files_api.upload_book, methods=["POST"]),
        Route("/api/pgn/{name}", files_api.task_pgn, methods=["GET"]),
        Route("/api/run_pgns/{name}", files_api.run_pgns, methods=["GET"]),
        Route("/api/nns", files_api.list_nets, methods=["GET"]),
        Route("/api/nn/{name}", files_api.download_net, methods=["GET"]),
        Route("/api/books", files_api.list_books, methods=["GET"]),
        Route("/api/book/{name}", files_api.download_book, methods=["GET"]),
        # The worker's self-update: the wheel of this server's own worker code
        Route("/api/worker/package.json", files_api.worker_package_info, methods=["GET"]),
        Route("/api/worker/package", files_api.download_worker_package, methods=["GET"]),
        Route("/api/worker/{filename}", files_api.download_worker_wheel, methods=["GET"]),
        # Read-only API
        Route("/api/calc_elo", api.calc_elo_endpoint, methods=["GET"]),
        Route("/api/rate_limit", api.rate_limit, methods=["GET"]),
        Route("/api/active_runs", runs_api.active_runs, methods=["GET"]),
        Route("/api/finished_runs", runs_api.finished_runs, methods=["GET"]),
        Route("/api/actions", runs_api.list_actions, methods=["POST"]),
        Route("/api/get_run/{run_id}", runs_api.get_run, methods=["GET"]),
        Route("/api/get_task/{run_id}/{task_id}", runs_api.get_task, methods=["GET"]),
        Route("/api/get_elo/{run_id}", runs_api.get_elo, methods=["GET"]),
        # Health and monitoring (web/health.py)
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", health.readyz, methods=["GET"]),
        Route("/metrics", health.metrics, methods=["GET"]),
        # Pages
        Route("/", home.index, methods=["GET"]),
        Route("/tests", runs.tests, methods=["GET"]),
        Route("/tests/finished", finished.finished_tests, methods=["GET"]),
        Route("/tests/user/{username}", finished.user_tests, methods=["GET"]),
        Route("/tests/view/{run_id}", runs.run_page, methods=["GET"]),
        Route("/tests/run", new_run.new_run_form, methods=["GET"]),
        Route("/tests/run", new_run.submit_run, methods=["POST"]),
        Route("/tests/view/{run_id}/approve", run_actions.approve, methods=["POST"]),
        Route("/tests/view/{run_id}/stop", run_actions.stop, methods=["POST"]),
        Route("/tests/view/{run_id}/purge", run_actions.purge, methods=["POST"]),
        Route("/tests/view/{run_id}/delete", run_actions.delete, methods=["POST"]),
        Route("/tests/view/{run_id}/modify", run_actions.modify, methods=["POST"]),
        Route("/tests/view/{run_id}/follow", notify.follow, methods=["POST"]),
        Route("/tests/stats/{run_id}", run_stats.raw_stats_page, methods=["GET"]),
        Route("/tests/live_elo/{run_id}", run_stats.live_elo_page, methods=["GET"]),
        Route("/actions", fleet.actions, methods=["GET"]),
        Route("/contributors", fleet.contributors, methods=["GET"]),
        Route("/contributors/monthly", fleet.contributors_monthly, methods=["GET"]),
        Route("/machines", fleet.machines, methods=["GET"]),
        Route("/workers", fleet.blocked_workers, methods=["GET"]),
        Route("/workers/{worker_name}", fleet.worker, methods=["GET"]),
        Route("/workers/{worker_name}", fleet.set_worker_block, methods=["POST"]),
        Route("/workers/{worker_name}/release", fleet.release_worker, methods=["POST"]),
        Route("/workers/{worker_name}/purge", fleet.purge_worker, methods=["POST"]),
        Route("/sprt_calc", tools.sprt_calc, methods=["GET"]),
        Route("/login", accounts.login_form, methods=["GET"]),
        Route("/login", accounts.login, methods=["POST"]),
        Route("/logout", accounts.logout, methods=["POST"]),
        Route("/signup", accounts.signup_form, methods=["GET"]),
        Route("/signup", accounts.signup, methods=["POST"]),
        Route("/user", accounts.profile, methods=["GET"]),
        Route("/user/password", accounts.change_password, methods=["POST"]),
        Route("/user/profile", accounts.update_profile, methods=["POST"]),
        Route("/user/tokens", accounts.create_token, methods=["POST"]),
        Route("/user/tokens/{token_id:int}/revoke", accounts.revoke_token, methods=["POST"]),
        Route("/user/notifications", notify.notifications, methods=["GET"]),
        Route("/user/webhooks", notify.add_webhook, methods=["POST"]),
        Route("/user/webhooks/{hook_id:int}/delete", notify.remove_webhook, methods=["POST"]),
        Route("/user_management", users.user_management, methods=["GET"]),
        Route("/user_management/{username}/accept", users.accept, methods=["POST"]),
        Route("/user_management/{username}/reject", users.reject, methods=["POST"]),
        Route("/user_management/{username}/block", users.block, methods=["POST"]),
        Route("/user_management/{username}/unblock", users.unblock, methods=["POST"]),
        Route("/nns", files.nets_page, methods=["GET"]),
        Route("/books", files.books_page, methods=["GET"]),
        Route("/upload", files.upload_form, methods=["GET"]),
        Route("/upload", files.upload_net, methods=["POST"]),
        Route("/upload/book", files.upload_book, methods=["POST"]),
        # Browsers ask for it whatever the pages say: the icon, not a 404.
        Route("/favicon.ico", home.favicon, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
