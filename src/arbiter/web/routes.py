"""The whole URL map, API and pages, in one table (pinned by tests/web/test_routes.py).

Worker endpoints are in `arbiter.protocol.WORKER_PATHS`; a test checks that
each one is routed here.
"""

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from arbiter.web import api
from arbiter.web.templating import STATIC_DIR
from arbiter.web.ui import accounts, home, users

# Paths whose bodies may be as large as ARBITER_MAX_UPLOAD_BYTES (nets).
UPLOAD_PATHS: tuple[str, ...] = ("/upload", "/api/upload_net")


def routes() -> list[BaseRoute]:
    return [
        # Worker protocol (POST, JSON body with credentials)
        Route("/api/request_version", api.request_version, methods=["POST"]),
        # Read-only API
        Route("/api/calc_elo", api.calc_elo_endpoint, methods=["GET"]),
        # Pages
        Route("/", home.index, methods=["GET"]),
        Route("/tests", home.tests, methods=["GET"]),
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
        Route("/user_management", users.user_management, methods=["GET"]),
        Route("/user_management/{username}/accept", users.accept, methods=["POST"]),
        Route("/user_management/{username}/reject", users.reject, methods=["POST"]),
        Route("/user_management/{username}/block", users.block, methods=["POST"]),
        Route("/user_management/{username}/unblock", users.unblock, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
