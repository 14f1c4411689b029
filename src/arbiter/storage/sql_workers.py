"""Blocked and quarantined workers, and the machines' health (by short worker
name) on SQL."""

from collections.abc import Sequence
from dataclasses import asdict

from sqlalchemy import Connection, delete, select

from arbiter.storage.records import MachineHealthRecord, QuarantineRecord, WorkerBlockRecord
from arbiter.storage.schema import machine_health, machine_quarantine, workers
from arbiter.storage.sql_common import upsert, upsert_many

MAX_MESSAGE = 500  # the column's size, as in the reference


class SqlWorkerBlockStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, worker_name: str) -> WorkerBlockRecord | None:
        query = select(workers).where(workers.c.worker_name == worker_name)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else WorkerBlockRecord(**row._mapping)

    def set(self, worker_name: str, *, blocked: bool, message: str, at: float) -> None:
        values = {"blocked": blocked, "message": message[:MAX_MESSAGE], "last_updated": at}
        upsert(self._connection, workers, {"worker_name": worker_name}, values)

    def list_blocked(self) -> list[WorkerBlockRecord]:
        query = select(workers).where(workers.c.blocked.is_(True)).order_by(workers.c.worker_name)
        return [WorkerBlockRecord(**row._mapping) for row in self._connection.execute(query)]


class SqlQuarantineStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, worker_name: str) -> QuarantineRecord | None:
        query = select(machine_quarantine).where(machine_quarantine.c.worker_name == worker_name)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else QuarantineRecord(**row._mapping)

    def put(self, record: QuarantineRecord) -> None:
        values = asdict(record)
        key = {"worker_name": values.pop("worker_name")}
        upsert(self._connection, machine_quarantine, key, values)

    def active(self) -> list[QuarantineRecord]:
        query = (
            select(machine_quarantine)
            .where(machine_quarantine.c.active.is_(True))
            .order_by(machine_quarantine.c.since.desc())
        )
        return [QuarantineRecord(**row._mapping) for row in self._connection.execute(query)]

    def all(self) -> list[QuarantineRecord]:
        query = select(machine_quarantine).order_by(machine_quarantine.c.since.desc())
        return [QuarantineRecord(**row._mapping) for row in self._connection.execute(query)]


class SqlMachineHealthStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def put_many(self, records: Sequence[MachineHealthRecord]) -> None:
        rows = [asdict(record) for record in records]
        upsert_many(self._connection, machine_health, ["worker_name"], rows)

    def delete_checked_before(self, at: float) -> int:
        statement = delete(machine_health).where(machine_health.c.checked_at < at)
        return self._connection.execute(statement).rowcount

    def get(self, worker_name: str) -> MachineHealthRecord | None:
        query = select(machine_health).where(machine_health.c.worker_name == worker_name)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else MachineHealthRecord(**row._mapping)

    def of_user(self, username: str) -> list[MachineHealthRecord]:
        query = (
            select(machine_health)
            .where(machine_health.c.username == username)
            .order_by(machine_health.c.worker_name)
        )
        return [MachineHealthRecord(**row._mapping) for row in self._connection.execute(query)]
