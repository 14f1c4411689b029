"""`arbiter import fishtest DUMP_DIR`: the collections of a mongodump, in
batches, each committed with its progress marker.

A marker per collection (`import/fishtest/<dump>/<collection>` in the kv table)
holds the offset in the file after the last committed batch and the counts so
far, written in the batch's own transaction: an interrupted import continues
after the last batch that committed, and a finished one is not read again.
Rows are inserted only where their key is not stored yet, so even a batch
written twice changes nothing. A target that holds anything but an import of
this dump is refused unless `merge` is set.

Runs in the calling thread (a command-line process): blocking I/O throughout.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from argon2 import PasswordHasher
from sqlalchemy.exc import DBAPIError, StatementError

from arbiter.domain.runs import chi2_summaries, contribution_totals
from arbiter.importer.collections import IGNORED, Document, Kind, Prepared, kinds
from arbiter.importer.dump import BadDocument, CollectionFile, DocumentStream, fingerprint
from arbiter.importer.progress import Progress
from arbiter.importer.report import CollectionReport, ImportReport
from arbiter.importer.runs import ImportedRun
from arbiter.storage import Storage
from arbiter.storage.errors import StorageUnavailable
from arbiter.storage.records import NetRecord

log = logging.getLogger(__name__)
# Why a batch's write can fail on what its documents hold: the database's
# refusal, or a value its driver or our encoders cannot take. The batch is
# then written one item at a time, and what still fails is reported and skipped.
WRITE_REFUSALS = (StatementError, TypeError, ValueError, OverflowError)

BATCH_DOCUMENTS = 500
BATCH_BYTES = 16 << 20  # PGNs are large: a batch stops at this many bytes of BSON too


class TargetNotEmpty(Exception):  # noqa: N818 - named for what happened
    """The target holds other data and merging was not asked for."""


@dataclass(frozen=True, slots=True)
class ImportOptions:
    merge: bool = False
    nets_dir: Path | None = None
    batch_documents: int = BATCH_DOCUMENTS
    stop_after_batches: int | None = None  # tests: an interruption at a known place


class FishtestImport:
    def __init__(
        self,
        storage: Storage,
        files: dict[str, CollectionFile],
        *,
        hasher: PasswordHasher,
        options: ImportOptions,
        progress: Progress,
    ) -> None:
        self._storage = storage
        self._files = files
        self._options = options
        self._progress = progress
        self._kinds = kinds(storage, hasher, options.nets_dir)
        self._prefix = f"import/fishtest/{fingerprint(files)[:16]}/"
        self._batches = 0

    def run(self) -> ImportReport:
        report = ImportReport(resumed=self._check_target())
        for name, kind in self._kinds.items():
            file = self._files.get(name)
            if file is None:
                report.ignored[name] = "no file in the dump"
                continue
            collection = self._import(file, kind)
            report.collections.append(collection)
            if not collection.complete and collection.error is None:
                break  # stopped on purpose (stop_after_batches)
        for name in sorted(set(self._files) - set(self._kinds)):
            report.ignored[name] = IGNORED.get(name, "not used by Arbiter")
        if any(c.name == "runs" and c.complete for c in report.collections):
            # Derived from the runs and tasks, exactly as live operation keeps them.
            contribution_totals.rebuild(self._storage)
            chi2_summaries.score_large_runs(self._storage)
        return report

    def _check_target(self) -> bool:
        """True when continuing an import of this dump; refuses a target with
        other data unless merging."""
        with self._storage.read() as tx:
            markers = [tx.kv.get(self._prefix + name) for name in self._kinds]
            counts = tx.imports.counts()
        resumed = any(marker is not None for marker in markers)
        if not resumed and any(counts.values()) and not self._options.merge:
            held = ", ".join(f"{count:,} {table}" for table, count in counts.items() if count)
            raise TargetNotEmpty(
                f"the target database is not empty ({held}): "
                "pass --merge to import into it all the same"
            )
        return resumed

    def _import(self, file: CollectionFile, kind: Kind) -> CollectionReport:
        key = self._prefix + file.name
        with self._storage.read() as tx:
            marker = tx.kv.get(key)
        report = (
            CollectionReport(file.name)
            if marker is None
            else CollectionReport.from_marker(file.name, marker)
        )
        if report.complete:
            return report
        self._progress.start(file.name, file.size)
        batch: list[Document] = []
        batch_bytes, offset = 0, report.offset
        with DocumentStream(file, report.offset) as stream:
            try:
                for document, end in stream:
                    batch.append(document)
                    batch_bytes += end - offset
                    offset = end
                    if len(batch) >= self._options.batch_documents or batch_bytes >= BATCH_BYTES:
                        self._commit(key, kind, batch, end, report)
                        self._progress.update(stream.disk_position, report.documents)
                        batch, batch_bytes = [], 0
                        if self._stop_now():
                            return report
            except BadDocument as error:
                report.error = str(error)
        report.complete = True
        self._commit(key, kind, batch, offset, report)
        self._progress.finish(report.documents)
        return report

    def _stop_now(self) -> bool:
        self._batches += 1
        limit = self._options.stop_after_batches
        return limit is not None and self._batches >= limit

    def _commit(
        self, key: str, kind: Kind, batch: list[Document], end: int, report: CollectionReport
    ) -> None:
        """Write one batch and the marker that says it is done, in one transaction.
        A batch the database refuses is written again one item at a time, and
        the items it still refuses are skipped with its reason."""
        prepared = kind.prepare(batch)
        report.documents += len(batch)
        report.offset = end
        for reason, example in prepared.skipped:
            report.skip(reason, example)
        report.notes.update(prepared.notes)
        imported = report.imported
        try:
            with self._storage.write() as tx:
                kind.write(tx, prepared.items)
                report.imported += len(prepared.items)  # the marker counts them
                tx.kv.set(key, report.to_marker())
            return
        except StorageUnavailable:
            raise
        except WRITE_REFUSALS:
            report.imported = imported
            log.info("a batch of %s was refused; writing it one item at a time", report.name)
        self._commit_one_by_one(key, kind, prepared, report)

    def _commit_one_by_one(
        self,
        key: str,
        kind: Kind,
        prepared: Prepared,
        report: CollectionReport,
    ) -> None:
        for item in prepared.items:
            try:
                with self._storage.write() as tx:
                    kind.write(tx, [item])
            except StorageUnavailable:
                raise
            except WRITE_REFUSALS as error:
                report.skip(_refusal(error), _item_id(item))
            else:
                report.imported += 1
        with self._storage.write() as tx:
            tx.kv.set(key, report.to_marker())


def _refusal(error: Exception) -> str:
    """The first line of why an item was not written, for the report."""
    cause = error.orig if isinstance(error, StatementError) else error
    first_line = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:200]
    if isinstance(error, DBAPIError):
        return f"refused by the database: {first_line}"
    return f"not writable ({type(cause).__name__}: {first_line})"


def _item_id(item: object) -> str | None:  # noqa: PLR0911 - one return per kind of item
    """What names an item in the report: a run's or action's id, a user's or
    net's name, a PGN's run-task, a worker's or key's name."""
    if isinstance(item, ImportedRun):
        return item.run.id
    if isinstance(item, NetRecord):
        return item.name
    if isinstance(item, tuple):
        return str(item[0])
    if isinstance(item, dict):
        if item.get("fishtest_id"):
            return str(item["fishtest_id"])
        if "pgn_zip" in item:
            return f"{item['run_id']}-{item['task_id']}"
        return str(item.get("username", "")) or None
    return None
