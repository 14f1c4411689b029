"""The worker protocol: version and endpoint paths. Imports nothing of ours.

The wire format is compatible with Fishtest's worker API (protocol 325), so a
Fishtest worker fleet can point at Arbiter.
"""

WORKER_VERSION = 325

API_PREFIX = "/api/"

# Worker endpoints: POST, JSON body with credentials. Served by the primary only.
WORKER_PATHS: tuple[str, ...] = (
    "/api/request_version",
    "/api/request_task",
    "/api/update_task",
    "/api/beat",
    "/api/request_spsa",
    "/api/failed_task",
    "/api/stop_run",
    "/api/upload_pgn",
    "/api/worker_log",
)

__all__ = ["API_PREFIX", "WORKER_PATHS", "WORKER_VERSION"]
