"""Follows, the run events outbox, webhooks and their deliveries on SQL."""

from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from arbiter.storage.records import DeliveryRecord, RunEventRecord, WebhookRecord
from arbiter.storage.schema import follows, run_events, runs, webhook_deliveries, webhooks


class SqlFollowStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, username: str, run_id: str, at: float) -> None:
        if not self.has(username, run_id):
            values = {"username": username, "run_id": run_id, "created_at": at}
            self._connection.execute(insert(follows).values(values))

    def remove(self, username: str, run_id: str) -> None:
        where = (follows.c.username == username) & (follows.c.run_id == run_id)
        self._connection.execute(delete(follows).where(where))

    def has(self, username: str, run_id: str) -> bool:
        where = (follows.c.username == username) & (follows.c.run_id == run_id)
        return self._connection.execute(select(follows.c.run_id).where(where)).first() is not None

    def of_user(self, username: str) -> set[str]:
        query = select(follows.c.run_id).where(follows.c.username == username)
        return {row[0] for row in self._connection.execute(query)}

    def followers(self, run_id: str) -> list[str]:
        query = select(follows.c.username).where(follows.c.run_id == run_id)
        return sorted(row[0] for row in self._connection.execute(query))

    def finished_since(self, username: str, since: float, limit: int) -> list[tuple[str, float]]:
        """(run id, finish time) of the user's followed runs finished after `since`."""
        query = (
            select(runs.c.id, runs.c.last_updated)
            .join(follows, follows.c.run_id == runs.c.id)
            .where(follows.c.username == username, runs.c.finished.is_(True))
            .where(runs.c.deleted.is_(False), runs.c.last_updated > since)
            .order_by(runs.c.last_updated)
            .limit(limit)
        )
        return [(row[0], float(row[1])) for row in self._connection.execute(query)]


class SqlRunEventStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(
        self, *, time: float, event: str, run_id: str, action_id: int, worker: str = ""
    ) -> None:
        values = {
            "time": time,
            "event": event,
            "run_id": run_id,
            "worker": worker,
            "action_id": action_id,
            "dispatched": False,
        }
        self._connection.execute(insert(run_events).values(values))

    def undispatched(self, limit: int) -> list[RunEventRecord]:
        query = (
            select(run_events)
            .where(run_events.c.dispatched.is_(False))
            .order_by(run_events.c.id)
            .limit(limit)
        )
        return [RunEventRecord(**row._mapping) for row in self._connection.execute(query)]

    def mark_dispatched(self, event_ids: list[int]) -> None:
        if event_ids:
            statement = update(run_events).where(run_events.c.id.in_(event_ids))
            self._connection.execute(statement.values(dispatched=True))


def _hook(row: Row[Any]) -> WebhookRecord:
    return WebhookRecord(**row._mapping)


def _delivery(row: Row[Any]) -> DeliveryRecord:
    return DeliveryRecord(**row._mapping)


class SqlWebhookStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(
        self,
        *,
        username: str,
        url: str,
        events: str,
        format: str,
        secret: str,
        all_runs: bool,
        at: float,
    ) -> int:
        values = {
            "username": username,
            "url": url,
            "events": events,
            "format": format,
            "secret": secret,
            "all_runs": all_runs,
            "created_at": at,
        }
        statement = insert(webhooks).values(values).returning(webhooks.c.id)
        return int(self._connection.execute(statement).scalar_one())

    def get(self, hook_id: int) -> WebhookRecord | None:
        row = self._connection.execute(select(webhooks).where(webhooks.c.id == hook_id)).first()
        return None if row is None else _hook(row)

    def remove(self, hook_id: int) -> None:
        self._connection.execute(
            delete(webhook_deliveries).where(webhook_deliveries.c.hook_id == hook_id)
        )
        self._connection.execute(delete(webhooks).where(webhooks.c.id == hook_id))

    def of_user(self, username: str) -> list[WebhookRecord]:
        query = select(webhooks).where(webhooks.c.username == username).order_by(webhooks.c.id)
        return [_hook(row) for row in self._connection.execute(query)]

    def all(self) -> list[WebhookRecord]:
        return [_hook(row) for row in self._connection.execute(select(webhooks))]

    def add_delivery(
        self, *, hook_id: int, event: str, run_id: str, body: str, at: float, worker: str = ""
    ) -> int:
        values = {
            "hook_id": hook_id,
            "event": event,
            "run_id": run_id,
            "worker": worker,
            "body": body,
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": at,
            "last_code": None,
            "last_error": "",
            "created_at": at,
            "delivered_at": None,
        }
        statement = insert(webhook_deliveries).values(values).returning(webhook_deliveries.c.id)
        return int(self._connection.execute(statement).scalar_one())

    def due(self, now: float, limit: int) -> list[DeliveryRecord]:
        query = (
            select(webhook_deliveries)
            .where(webhook_deliveries.c.status == "pending")
            .where(webhook_deliveries.c.next_attempt_at <= now)
            .order_by(webhook_deliveries.c.next_attempt_at, webhook_deliveries.c.id)
            .limit(limit)
        )
        return [_delivery(row) for row in self._connection.execute(query)]

    def save_attempt(
        self,
        delivery_id: int,
        *,
        status: str,
        attempts: int,
        next_attempt_at: float,
        last_code: int | None,
        last_error: str,
        delivered_at: float | None,
    ) -> None:
        statement = update(webhook_deliveries).where(webhook_deliveries.c.id == delivery_id)
        self._connection.execute(
            statement.values(
                status=status,
                attempts=attempts,
                next_attempt_at=next_attempt_at,
                last_code=last_code,
                last_error=last_error[:300],
                delivered_at=delivered_at,
            )
        )

    def deliveries(self, hook_id: int, limit: int) -> list[DeliveryRecord]:
        query = (
            select(webhook_deliveries)
            .where(webhook_deliveries.c.hook_id == hook_id)
            .order_by(webhook_deliveries.c.id.desc())
            .limit(limit)
        )
        return [_delivery(row) for row in self._connection.execute(query)]
