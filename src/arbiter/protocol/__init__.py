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

# A worker call answered with one of these statuses was refused for now: the
# body is a JSON string (never an object with `error`, which the official
# worker takes as final) and Retry-After says when to come back.
TEMPORARY_STATUSES = frozenset({429, 503})

__all__ = ["API_PREFIX", "TEMPORARY_STATUSES", "WORKER_PATHS", "WORKER_VERSION"]
