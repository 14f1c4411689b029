"""Each collection's import: documents to items (`prepare`, outside any
transaction) and items to rows (`write`, inside the batch's transaction).

An item is written alone when its batch is refused, so `write` takes any
sub-list of what `prepare` returned.
"""

import hashlib
import os
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher

from arbiter.domain.arch_filter import matching_archs
from arbiter.domain.errors import ValidationError
from arbiter.domain.files.stored import NET, is_stored, store
from arbiter.importer.others import (
    UserFields,
    convert_action,
    convert_kv,
    convert_net,
    convert_pgn,
    convert_user,
    convert_worker,
)
from arbiter.importer.runs import ImportedRun, Skip, convert_run
from arbiter.importer.values import object_id_text
from arbiter.storage import Storage, Tx
from arbiter.storage.records import NetRecord, evolve

Document = dict[str, Any]


@dataclass(slots=True)
class Prepared:
    items: list[Any] = field(default_factory=list)
    skipped: list[tuple[str, str | None]] = field(default_factory=list)  # (reason, id)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Kind:
    prepare: Callable[[list[Document]], Prepared]
    write: Callable[[Tx, list[Any]], None]


def example_id(document: Document) -> str | None:
    value = document.get("_id")
    return None if value is None else (object_id_text(value) or str(value)[:40])


def _each(
    documents: list[Document], convert: Callable[[Document], Any], prepared: Prepared
) -> list[tuple[Document, Any]]:
    """Convert each document; a Skip is counted with its reason, and so is a
    document of a shape no rule foresaw (reported, never a traceback that
    would stop the import again at the same place on every resume)."""
    converted = []
    for document in documents:
        try:
            converted.append((document, convert(document)))
        except Skip as skip:
            prepared.skipped.append((str(skip), example_id(document)))
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as error:
            reason = f"unreadable ({type(error).__name__}: {str(error)[:120]})"
            prepared.skipped.append((reason, example_id(document)))
    return converted


# ------------------------------------------------------------------ runs


def prepare_runs(documents: list[Document]) -> Prepared:
    prepared = Prepared()
    for _, item in _each(documents, convert_run, prepared):
        prepared.notes += item.notes
        prepared.items.append(_with_allowed_archs(item, prepared))
    return prepared


def _with_allowed_archs(item: ImportedRun, prepared: Prepared) -> ImportedRun:
    """An unfinished run's arch filter, worked out once as at submission, so the
    scheduler never runs the user's regex (finished runs need none)."""
    arch_filter = item.run.args.arch_filter
    if item.run.finished or not arch_filter:
        return item
    try:
        allowed = sorted(matching_archs(str(arch_filter)))
    except ValidationError:
        prepared.notes.append("arch_filter unusable: the run takes any arch")
        return item
    return replace(item, run=evolve(item.run, args=evolve(item.run.args, allowed_archs=allowed)))


def write_runs(tx: Tx, items: list[ImportedRun]) -> None:
    tx.imports.add_runs([item.run for item in items])
    tx.imports.add_tasks([task for item in items for task in item.tasks])
    for item in items:
        if item.bad_copies:
            tx.kv.set(f"bad_tasks/{item.run.id}", item.bad_copies)


# ------------------------------------------------------------------ users


def users_kind(storage: Storage, hasher: PasswordHasher) -> Kind:
    def prepare(documents: list[Document]) -> Prepared:
        prepared = Prepared()
        converted = _each(documents, convert_user, prepared)
        keys = [fields.row["username_key"] for _, fields in converted]
        with storage.read() as tx:
            taken = tx.imports.taken_usernames(keys)
        new: list[UserFields] = []
        for _, fields in converted:
            name, key = fields.row["username"], fields.row["username_key"]
            if key in taken:
                reason = (
                    "account exists already"
                    if taken[key] == name
                    else f"name differs only in case from {taken[key]}"
                )
                prepared.skipped.append((reason, name))
                continue
            taken[key] = name
            prepared.notes += [f"group {group} not kept" for group in fields.other_groups]
            if not fields.password:
                prepared.notes.append("no password: a random one stored")
            new.append(fields)
        # argon2 releases the GIL: one hash per core at once.
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            hashes = list(pool.map(lambda fields: hasher.hash(_password(fields)), new))
        prepared.items = [
            {**fields.row, "password_hash": password_hash}
            for fields, password_hash in zip(new, hashes, strict=True)
        ]
        return prepared

    return Kind(prepare, lambda tx, rows: tx.imports.add_users(rows))


def _password(fields: UserFields) -> str:
    """The password to hash: Fishtest's, or for an account without one an
    unguessable one (Fishtest let an empty password log in; Arbiter does not)."""
    return fields.password or secrets.token_urlsafe(32)


# ------------------------------------------------------------------ actions


def prepare_actions(documents: list[Document]) -> Prepared:
    prepared = Prepared()
    for _, (row, known) in _each(documents, convert_action, prepared):
        if not known:
            prepared.notes.append(f"action name {row['action']!r} kept (Arbiter writes none)")
        prepared.items.append(row)
    return prepared


# ------------------------------------------------------------------ nets


def nets_kind(nets_dir: Path | None) -> Kind:
    """Net metadata, and the file itself when `nets_dir` has it (hash-checked,
    stored in the database's chunks with its record, as an upload would be)."""

    def prepare(documents: list[Document]) -> Prepared:
        prepared = Prepared()
        for _, net in _each(documents, convert_net, prepared):
            source = _net_file(net.name, nets_dir, prepared)
            sha256, size = ("", 0) if source is None else (source[1], source[0].stat().st_size)
            record = NetRecord(
                name=net.name,
                username=net.username,
                sha256=sha256,
                size=size,
                uploaded_at=net.uploaded_at,
                downloads=net.downloads,
                is_master=net.is_master,
                first_test=net.first_test,
                last_test=net.last_test,
            )
            prepared.items.append((record, None if source is None else source[0]))
        return prepared

    return Kind(prepare, write_nets)


def write_nets(tx: Tx, nets: list[tuple[NetRecord, Path | None]]) -> None:
    """The records not stored yet, and the bytes of those that have a file (a
    second import of the same dump finds them stored and writes nothing)."""
    tx.imports.add_nets([record for record, _ in nets])
    for record, source in nets:
        if source is not None and not is_stored(tx, NET, record.name, record.size):
            store(tx, NET, record.name, source)


def _net_file(name: str, nets_dir: Path | None, prepared: Prepared) -> tuple[Path, str] | None:
    """The net's file in the dump and its sha256, when it has one that hashes to
    the name."""
    source = None if nets_dir is None else nets_dir / name
    if source is None or not source.is_file():
        prepared.notes.append("net file not in the dump: metadata only")
        return None
    digest = hashlib.sha256()
    with source.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    sha256 = digest.hexdigest()
    if not name.startswith(f"nn-{sha256[:12]}"):
        prepared.notes.append("net file does not hash to its name: metadata only")
        return None
    return source, sha256


# ------------------------------------------------------------------ the rest


def prepare_pgns(documents: list[Document]) -> Prepared:
    prepared = Prepared()
    prepared.items = [row for _, row in _each(documents, convert_pgn, prepared)]
    return prepared


def prepare_workers(documents: list[Document]) -> Prepared:
    prepared = Prepared()
    prepared.items = [block for _, block in _each(documents, convert_worker, prepared)]
    return prepared


def write_workers(tx: Tx, blocks: list[tuple[str, bool, str, float]]) -> None:
    for name, blocked, message, at in blocks:
        tx.worker_blocks.set(name, blocked=blocked, message=message, at=at)


def prepare_kv(documents: list[Document]) -> Prepared:
    prepared = Prepared()
    prepared.items = [pair for _, pair in _each(documents, convert_kv, prepared)]
    return prepared


def write_kv(tx: Tx, pairs: list[tuple[str, Any]]) -> None:
    for key, value in pairs:
        tx.kv.set(key, value)


def kinds(storage: Storage, hasher: PasswordHasher, nets_dir: Path | None) -> dict[str, Kind]:
    """The collections imported, in import order (users before their runs'
    pages are looked at, runs before the actions that name them)."""
    return {
        "users": users_kind(storage, hasher),
        "runs": Kind(prepare_runs, write_runs),
        "actions": Kind(prepare_actions, lambda tx, rows: tx.imports.add_actions(rows)),
        "nns": nets_kind(nets_dir),
        "pgns": Kind(prepare_pgns, lambda tx, rows: tx.imports.add_pgns(rows)),
        "workers": Kind(prepare_workers, write_workers),
        "kvstore": Kind(prepare_kv, write_kv),
    }


# Collections of the reference that hold nothing Arbiter keeps.
IGNORED = {
    "deltas": "SPSA deltas of old runs; the runs keep their SPSA state",
    "user_cache": "a cache of contributor totals, which Arbiter computes",
    "top_month": "a cache of the monthly contributors, which Arbiter computes",
}
