"""Task PGNs, nets and opening books on SQL.

PGNs live in the database as one gzip member per task; nets and hosted books
as their metadata rows plus their bytes in numbered chunks (`file_chunks`).
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection, Row, Table, and_, delete, func, select, true, tuple_, update

from arbiter.storage.records import BookRecord, NetRecord, NetSearch, PgnInfo, UploadTally
from arbiter.storage.schema import books, file_chunks, nets, pgns
from arbiter.storage.sql_common import unique, upsert


class SqlPgnStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def put(self, run_id: str, task_id: int, pgn_zip: bytes, at: float) -> None:
        key = {"run_id": run_id, "task_id": task_id}
        values = {"pgn_zip": pgn_zip, "size": len(pgn_zip), "uploaded_at": at}
        upsert(self._connection, pgns, key, values)

    def get(self, run_id: str, task_id: int) -> bytes | None:
        query = select(pgns.c.pgn_zip).where(pgns.c.run_id == run_id, pgns.c.task_id == task_id)
        data = self._connection.execute(query).scalar()
        return None if data is None else bytes(data)

    def list_for_run(self, run_id: str) -> list[PgnInfo]:
        columns = (pgns.c.run_id, pgns.c.task_id, pgns.c.size, pgns.c.uploaded_at)
        query = select(*columns).where(pgns.c.run_id == run_id).order_by(pgns.c.task_id)
        return [PgnInfo(**row._mapping) for row in self._connection.execute(query)]

    def delete_for_run(self, run_id: str) -> int:
        return self._connection.execute(delete(pgns).where(pgns.c.run_id == run_id)).rowcount

    def delete_uploaded_before(self, cutoff: float, limit: int) -> int:
        oldest = (
            select(pgns.c.run_id, pgns.c.task_id)
            .where(pgns.c.uploaded_at < cutoff)
            .order_by(pgns.c.uploaded_at)
            .limit(limit)
        )
        keys = [tuple(row) for row in self._connection.execute(oldest)]
        if not keys:
            return 0
        doomed = tuple_(pgns.c.run_id, pgns.c.task_id).in_(keys)
        return self._connection.execute(delete(pgns).where(doomed)).rowcount


def _net(row: Row[Any]) -> NetRecord:
    return NetRecord(**row._mapping)


class SqlNetStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, net: NetRecord) -> None:
        with unique(self._connection, "net", net.name):
            self._connection.execute(nets.insert().values(asdict(net)))

    def get(self, name: str) -> NetRecord | None:
        row = self._connection.execute(select(nets).where(nets.c.name == name)).one_or_none()
        return None if row is None else _net(row)

    def list(self, *, limit: int) -> list[NetRecord]:
        query = select(nets).order_by(nets.c.uploaded_at.desc(), nets.c.name).limit(limit)
        return [_net(row) for row in self._connection.execute(query)]

    def search(
        self, found: NetSearch, *, offset: int, limit: int
    ) -> tuple[Sequence[NetRecord], int]:
        conditions = []
        if found.name_contains:
            conditions.append(nets.c.name.contains(found.name_contains, autoescape=True))
        if found.username:
            conditions.append(func.lower(nets.c.username) == found.username.lower())
        if found.master_only:
            conditions.append(nets.c.is_master.is_(True))
        where = and_(true(), *conditions)
        total = self._connection.execute(select(func.count()).select_from(nets).where(where))
        query = (
            select(nets)
            .where(where)
            .order_by(nets.c.uploaded_at.desc(), nets.c.name)
            .offset(offset)
            .limit(limit)
        )
        return [_net(row) for row in self._connection.execute(query)], int(total.scalar_one())

    def add_downloads(self, name: str, count: int) -> None:
        # An increment in SQL, so processes sharing the database never lose one another's.
        added = nets.c.downloads + count
        statement = update(nets).where(nets.c.name == name).values(downloads=added)
        self._connection.execute(statement)

    def uploaded_by(self, username: str, since: float) -> UploadTally:
        return _tally(self._connection, nets, username, since)

    def mark_tested(self, name: str, test: Mapping[str, Any], *, master: bool) -> None:
        # JSON columns keep a Python None as JSON null, which SQL's IS NULL does
        # not match: the first test is decided on the row as read.
        net = self.get(name)
        if net is None:
            return
        values: dict[str, Any] = {"last_test": dict(test)}
        if net.first_test is None:
            values["first_test"] = dict(test)
        if master:
            values["is_master"] = True
        self._connection.execute(update(nets).where(nets.c.name == name).values(values))


def _tally(connection: Connection, table: Table, username: str, since: float) -> UploadTally:
    query = select(func.count(), func.sum(table.c.size), func.min(table.c.uploaded_at)).where(
        table.c.username == username, table.c.uploaded_at >= since
    )
    files, size, oldest = connection.execute(query).one()
    return UploadTally(int(files), int(size or 0), None if oldest is None else float(oldest))


class SqlBookStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, book: BookRecord) -> None:
        with unique(self._connection, "book", book.name):
            self._connection.execute(books.insert().values(asdict(book)))

    def get(self, name: str) -> BookRecord | None:
        row = self._connection.execute(select(books).where(books.c.name == name)).one_or_none()
        return None if row is None else BookRecord(**row._mapping)

    def list(self) -> list[BookRecord]:
        query = select(books).order_by(books.c.name)
        return [BookRecord(**row._mapping) for row in self._connection.execute(query)]

    def uploaded_by(self, username: str, since: float) -> UploadTally:
        return _tally(self._connection, books, username, since)


class SqlFileChunkStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def put(self, kind: str, name: str, seq: int, data: bytes, sha256: str) -> None:
        row = {"kind": kind, "name": name, "seq": seq, "sha256": sha256, "data": data}
        self._connection.execute(file_chunks.insert().values(row))

    def get(self, kind: str, name: str, seq: int) -> tuple[bytes, str] | None:
        query = select(file_chunks.c.data, file_chunks.c.sha256).where(
            file_chunks.c.kind == kind, file_chunks.c.name == name, file_chunks.c.seq == seq
        )
        row = self._connection.execute(query).one_or_none()
        return None if row is None else (bytes(row.data), str(row.sha256))

    def get_part(
        self, kind: str, name: str, seq: int, start: int, stop: int | None
    ) -> bytes | None:
        # substr counts from 1 and works on SQLite blobs and PostgreSQL bytea alike.
        data = file_chunks.c.data
        part = (
            func.substr(data, start + 1)
            if stop is None
            else func.substr(data, start + 1, max(0, stop - start))
        )
        query = select(part.label("part")).where(
            file_chunks.c.kind == kind, file_chunks.c.name == name, file_chunks.c.seq == seq
        )
        row = self._connection.execute(query).one_or_none()
        return None if row is None else bytes(row.part)

    def count(self, kind: str, name: str) -> int:
        query = select(func.count()).where(file_chunks.c.kind == kind, file_chunks.c.name == name)
        return int(self._connection.execute(query).scalar_one())

    def delete(self, kind: str, name: str) -> int:
        statement = delete(file_chunks).where(
            file_chunks.c.kind == kind, file_chunks.c.name == name
        )
        return self._connection.execute(statement).rowcount
