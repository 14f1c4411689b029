"""Webhooks: a user (or an approver, for every run) registers a URL for run
events (approved, finished, stopped) and machine events (quarantined) in
generic JSON or a Discord / Slack compatible body. A run's events go to its
author's hooks, its followers' and the approvers' hooks for every run; a
machine's quarantine goes to its owner's hooks and the approvers' hooks for
every run.

Events come from the `run_events` outbox, written in the transaction that
records the action (`domain/actions.py`), so none is lost and none is sent for
a change that was rolled back. The `deliver_webhooks` job (jobs executor,
never a request) turns new events into one delivery row per matching hook,
then sends the deliveries that are due: a POST signed with HMAC-SHA256 of the
body under the hook's secret (`X-Arbiter-Signature: sha256=<hex>`). A failed
attempt is retried with doubling waits, up to MAX_ATTEMPTS; each hook's
recent deliveries are shown on its owner's profile page.

A delivery connects to the very address the URL policy checked (no second
DNS answer can redirect it) and ends within DELIVERY_DEADLINE_SECONDS however
its receiver drips its reply. Each pass sends the owners' deliveries side by
side, in LANES threads, at most PER_OWNER_PER_PASS of one owner's, so a slow
or hostile receiver holds up only its own owner's deliveries.
"""

import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from arbiter.domain import quarantine
from arbiter.domain.accounts import User
from arbiter.domain.errors import NotFound, PermissionDenied, ValidationError
from arbiter.domain.profile_fields import same_username
from arbiter.domain.url_policy import Destination, check_url, destination
from arbiter.protocol.workers import owner_of
from arbiter.storage import Storage, Tx
from arbiter.storage.records import DeliveryRecord, RunEventRecord, RunRecord, WebhookRecord

log = logging.getLogger("arbiter.webhooks")

EVENTS = ("finished", "approved", "stopped", quarantine.QUARANTINED)
FORMATS = {"json": "Generic JSON", "discord": "Discord", "slack": "Slack"}
MAX_HOOKS_PER_USER = 10
MAX_ATTEMPTS = 8
FIRST_RETRY_SECONDS = 30.0
MAX_RETRY_SECONDS = 3600.0
SEND_TIMEOUT_SECONDS = 10.0  # to connect, and for each read
DELIVERY_DEADLINE_SECONDS = 15.0  # for the whole exchange
EVENTS_PER_PASS = 200
DELIVERIES_SCANNED = 1000  # due deliveries looked at per pass, oldest first
PER_OWNER_PER_PASS = 2  # of those, sent per owner per pass
LANES = 4  # owners whose deliveries go out at once
LOG_LENGTH = 20  # deliveries shown per hook
SIGNATURE_HEADER = "X-Arbiter-Signature"

# (destination, body, headers) -> HTTP status; raises OSError or
# http.client.HTTPException when nothing came back.
Sender = Callable[[Destination, bytes, Mapping[str, str]], int]


class DeliveryTooSlow(OSError):  # noqa: N818 - named for what happened
    """The receiver did not answer within DELIVERY_DEADLINE_SECONDS."""


def post(target: Destination, body: bytes, headers: Mapping[str, str]) -> int:
    """One POST to the checked address (the name is not resolved again; https
    checks the certificate against the URL's host), no redirect followed, all
    of it within DELIVERY_DEADLINE_SECONDS: a watchdog shuts the connection of
    a receiver that answers a byte at a time. Only the status is read. [JOB]"""
    address = (target.address.split("%", 1)[0], target.port)
    connection = socket.create_connection(address, timeout=SEND_TIMEOUT_SECONDS)
    current: list[socket.socket] = [connection]
    expired = threading.Event()

    def shut() -> None:
        expired.set()
        with contextlib.suppress(OSError):  # already closed: nothing to wake
            current[0].shutdown(socket.SHUT_RDWR)  # wakes a read that waits

    watchdog = threading.Timer(DELIVERY_DEADLINE_SECONDS, shut)
    watchdog.start()
    try:
        if target.scheme == "https":
            context = ssl.create_default_context()
            current[0] = context.wrap_socket(connection, server_hostname=target.host)
        client = http.client.HTTPConnection(target.host, target.port)
        client.sock = current[0]
        client.request("POST", target.target, body, {**headers, "Host": target.host_header})
        return client.getresponse().status
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise DeliveryTooSlow(f"no answer within {DELIVERY_DEADLINE_SECONDS:g} s") from None
        raise
    finally:
        watchdog.cancel()
        current[0].close()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` failed ones: 30 s, doubling, at most 1 h."""
    return min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2.0 ** max(attempts - 1, 0))


@dataclass(frozen=True, slots=True)
class HookView:
    hook: WebhookRecord
    deliveries: list[DeliveryRecord]


class Webhooks:
    def __init__(
        self,
        storage: Storage,
        *,
        base_url: str = "",
        allow_private: bool = False,
        send: Sender = post,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._storage = storage
        self._base_url = base_url.rstrip("/")
        self._allow_private = allow_private
        self._send = send
        self._clock = clock

    # --- the profile page [THREAD] ---

    def register(
        self, user: User, url: str, events: list[str], format: str, *, all_runs: bool = False
    ) -> WebhookRecord:
        url = url.strip()
        check_url(url)
        chosen = [event for event in EVENTS if event in events]
        if not chosen or len(chosen) != len(set(events)):
            raise ValidationError("events", "Choose one or more of: " + ", ".join(EVENTS) + ".")
        if format not in FORMATS:
            raise ValidationError("format", "Choose a format: " + ", ".join(FORMATS) + ".")
        if all_runs and not user.is_approver:
            raise PermissionDenied("Only approvers may hook every run.")
        with self._storage.write() as tx:
            if len(tx.webhooks.of_user(user.username)) >= MAX_HOOKS_PER_USER:
                raise ValidationError("url", f"At most {MAX_HOOKS_PER_USER} webhooks each.")
            hook_id = tx.webhooks.add(
                username=user.username,
                url=url,
                events=",".join(chosen),
                format=format,
                secret=secrets.token_hex(32),
                all_runs=all_runs,
                at=self._clock(),
            )
            hook = tx.webhooks.get(hook_id)
        assert hook is not None
        return hook

    def remove(self, user: User, hook_id: int) -> None:
        with self._storage.write() as tx:
            hook = tx.webhooks.get(hook_id)
            if hook is None or hook.username != user.username:
                raise NotFound(f"No webhook {hook_id}.")
            tx.webhooks.remove(hook_id)

    def of_user(self, username: str) -> list[HookView]:
        with self._storage.read() as tx:
            return [
                HookView(hook, tx.webhooks.deliveries(hook.id, LOG_LENGTH))
                for hook in tx.webhooks.of_user(username)
            ]

    # --- the job [JOB] ---

    def run(self) -> int:
        """The `deliver_webhooks` job: new events into deliveries, then send the due ones."""
        self.dispatch()
        return self.deliver_due()

    def dispatch(self) -> int:
        """One delivery per hook that matches each new event; returns how many."""
        made = 0
        with self._storage.write() as tx:
            events = tx.run_events.undispatched(EVENTS_PER_PASS)
            if not events:
                return 0
            hooks = tx.webhooks.all()
            for event in events:
                made += self._deliveries_of(tx, event, hooks)
            tx.run_events.mark_dispatched([event.id for event in events])
        return made

    def _deliveries_of(self, tx: Tx, event: RunEventRecord, hooks: list[WebhookRecord]) -> int:
        if event.worker:
            return self._machine_deliveries(tx, event, hooks)
        run = tx.runs.get(event.run_id)
        if run is None:
            return 0
        followers = set(tx.follows.followers(run.id))
        made = 0
        for hook in hooks:
            if event.event not in hook.events.split(","):
                continue
            if not (hook.all_runs or hook.username == run.username or hook.username in followers):
                continue
            body = self.body(hook.format, event.event, run, event.time)
            tx.webhooks.add_delivery(
                hook_id=hook.id, event=event.event, run_id=run.id, body=body, at=event.time
            )
            made += 1
        return made

    def _machine_deliveries(self, tx: Tx, event: RunEventRecord, hooks: list[WebhookRecord]) -> int:
        record = tx.quarantine.get(event.worker)
        reason = quarantine.reason(record) if record else ""
        owner = owner_of(event.worker)
        made = 0
        for hook in hooks:
            if event.event not in hook.events.split(","):
                continue
            if not (hook.all_runs or same_username(hook.username, owner)):
                continue
            body = self.machine_body(hook.format, event.event, event.worker, reason, event.time)
            tx.webhooks.add_delivery(
                hook_id=hook.id,
                event=event.event,
                run_id="",
                worker=event.worker,
                body=body,
                at=event.time,
            )
            made += 1
        return made

    def deliver_due(self) -> int:
        """Send the deliveries that are due, each owner's in a lane of its own
        (PER_OWNER_PER_PASS at most); returns how many arrived. Each attempt's
        outcome is written at once, so a crash repeats at most one POST."""
        now = self._clock()
        with self._storage.read() as tx:
            due = tx.webhooks.due(now, DELIVERIES_SCANNED)
            hooks = {hook.id: hook for hook in tx.webhooks.all()}
        lanes: dict[str, list[tuple[WebhookRecord, DeliveryRecord]]] = {}
        for delivery in due:
            hook = hooks.get(delivery.hook_id)
            if hook is None:
                continue
            lane = lanes.setdefault(hook.username, [])
            if len(lane) < PER_OWNER_PER_PASS:
                lane.append((hook, delivery))
        if not lanes:
            return 0
        with ThreadPoolExecutor(LANES, thread_name_prefix="webhook") as pool:
            return sum(pool.map(self._deliver_lane, lanes.values()))

    def _deliver_lane(self, lane: list[tuple[WebhookRecord, DeliveryRecord]]) -> int:
        return sum(self._attempt(hook, delivery) for hook, delivery in lane)

    def _attempt(self, hook: WebhookRecord, delivery: DeliveryRecord) -> int:
        body = delivery.body.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Arbiter-Webhooks",
            "X-Arbiter-Event": delivery.event,
            "X-Arbiter-Delivery": str(delivery.id),
            SIGNATURE_HEADER: signature(hook.secret, body),
        }
        code: int | None = None
        target = destination(hook.url, allow_private=self._allow_private)
        if isinstance(target, str):
            error = target
        else:
            try:
                code = self._send(target, body, headers)
                error = "" if 200 <= code < 300 else f"HTTP {code}"
            except (OSError, http.client.HTTPException) as failure:
                error = f"{type(failure).__name__}: {failure}"
        now = self._clock()
        attempts = delivery.attempts + 1
        if not error:
            status, next_at, done = "delivered", now, now
        else:
            status = "failed" if attempts >= MAX_ATTEMPTS else "pending"
            next_at, done = now + retry_delay(attempts), None
            log.info("webhook %d delivery %d: %s", hook.id, delivery.id, error)
        with self._storage.write() as tx:
            tx.webhooks.save_attempt(
                delivery.id,
                status=status,
                attempts=attempts,
                next_attempt_at=next_at,
                last_code=code,
                last_error=error,
                delivered_at=done,
            )
        return 1 if not error else 0

    # --- what is sent ---

    def body(self, format: str, event: str, run: RunRecord, at: float) -> str:
        """The delivery's JSON body in the hook's format."""
        url = f"{self._base_url}/tests/view/{run.id}" if self._base_url else f"/tests/view/{run.id}"
        title = f"{run.args.new_tag} vs {run.args.base_tag}"
        summary = _summary(run)
        line = f"Test {title} by {run.username} {event}: {summary} {url}"
        document: dict[str, object]
        if format == "discord":
            document = {"content": line}
        elif format == "slack":
            document = {"text": line}
        else:
            document = {
                "event": event,
                "time": at,
                "run": {
                    "id": run.id,
                    "url": url,
                    "title": title,
                    "username": run.username,
                    "approver": run.approver,
                    "finished": run.finished,
                    "is_green": run.is_green,
                    "is_yellow": run.is_yellow,
                    "games": run.wins + run.losses + run.draws,
                    "wins": run.wins,
                    "losses": run.losses,
                    "draws": run.draws,
                    "summary": summary,
                },
            }
        return _dumps(document)

    def machine_body(self, format: str, event: str, worker: str, reason: str, at: float) -> str:
        """A machine event's JSON body in the hook's format."""
        url = f"{self._base_url}/workers/{worker}"
        line = f"Machine {worker} {event}: {reason} {url}"
        if format in ("discord", "slack"):
            return _dumps({"content" if format == "discord" else "text": line})
        machine = {"name": worker, "owner": owner_of(worker), "url": url, "reason": reason}
        return _dumps({"event": event, "time": at, "machine": machine})


def _dumps(document: Mapping[str, object]) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def _summary(run: RunRecord) -> str:
    games = run.wins + run.losses + run.draws
    verdict = "accepted" if run.is_green else "yellow" if run.is_yellow else ""
    sprt = run.args.sprt
    llr = f"LLR {float(sprt.get('llr', 0.0)):.2f}, " if sprt else ""
    text = f"{llr}{games} games (W {run.wins} L {run.losses} D {run.draws})"
    return f"{verdict}, {text}" if verdict else text
