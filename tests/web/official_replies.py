"""How the official Fishtest worker (worker/worker.py and games.py, protocol
325) takes a reply, endpoint by endpoint, as its code decides it: the model the
temporary-refusal tests hold Arbiter's replies against.

Its `send_api_post_request` decodes the body; a body that is not a JSON object
raises WorkerException, which every caller treats as a network problem. A JSON
object with an `error` key is returned, and each caller then decides:

- request_version (every loop): a network problem returns None and the loop
  waits and asks again; `error` returns False and the worker exits;
- request_task: either way the loop waits and asks again (fleet mode exits);
- update_task: a network problem is retried, 5 tries 15 s apart; `error`
  ends the task and the batch's games are lost;
- beat: nothing it gets ends anything but `error`, which forgets the task;
- request_spsa: any failure ends the task (it has no retry);
- failed_task, stop_run, worker_log: a failure is printed;
- upload_pgn: a failure loses the task's PGN (the results are already in).
"""

import json
from enum import Enum


class Outcome(Enum):
    SERVED = "served"
    RETRIED = "retried later, nothing lost"
    FINAL = "final: the worker exits, or drops its task or its games"


def decoded_object(body: bytes) -> dict[str, object] | None:
    """The reply as `send_api_post_request` returns it; None where it raises."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


RETRY_ON_NETWORK_PROBLEM = frozenset(
    {"/api/request_version", "/api/request_task", "/api/update_task", "/api/beat"}
)
HARMLESS_FAILURE = frozenset({"/api/failed_task", "/api/stop_run", "/api/worker_log"})


def outcome(path: str, body: bytes) -> Outcome:
    """What the running official worker does with this reply to `path`."""
    data = decoded_object(body)
    if data is None:
        if path in RETRY_ON_NETWORK_PROBLEM or path in HARMLESS_FAILURE:
            return Outcome.RETRIED
        return Outcome.FINAL  # request_spsa ends the task, upload_pgn loses the PGN
    if "error" not in data:
        return Outcome.SERVED
    if path == "/api/request_task" or path in HARMLESS_FAILURE:
        return Outcome.RETRIED
    return Outcome.FINAL
