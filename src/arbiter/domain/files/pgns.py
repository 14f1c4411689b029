"""Task PGNs: validated on upload, stored as the worker's gzip, served as-is.

Workers send `base64(gzip(pgn text))`. We check that every member decompresses
(bounded, so a gzip bomb costs nothing) and keep the compressed bytes: a task's
download is those bytes with `Content-Encoding: gzip`. A run's download is
one gzip member holding every task's games in task order, recompressed as it
streams: concatenated members would be a valid gzip file too, but many
readers stop after the first member, and so would show one task's games.
"""

import base64
import binascii
import logging
import re
import time
import zlib
from collections.abc import Callable, Iterator

from arbiter.domain.errors import BadRequest, NotFound
from arbiter.storage import Storage

log = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b"
# A 250-game task gzips to ~200 kB; the caps leave room for long tasks and
# refuse what no honest worker sends.
MAX_PGN_GZIP_BYTES = 16 * 1024 * 1024
MAX_PGN_TEXT_BYTES = 256 * 1024 * 1024
# The upload_pgn body: base64 grows the gzip by 4/3, plus the JSON around it.
MAX_PGN_UPLOAD_BODY = MAX_PGN_GZIP_BYTES * 4 // 3 + 64 * 1024

DAY = 86400.0
EXPIRE_BATCH = 1000  # PGNs deleted in one transaction (about 200 MB of games)
EXPIRE_BATCHES = 100  # transactions in one run of the retention job

# The reference keeps what precedes the first dot, so `<run>-<task>`,
# `<run>-<task>.pgn` and any other suffix name the same PGN. The name is echoed
# in Content-Disposition, so a suffix may hold only filename-safe characters.
_TASK_PGN_NAME = re.compile(r"^([0-9a-f]{24})-(\d{1,9})(\.[A-Za-z0-9._-]*)?\Z")
_RUN_PGNS_NAME = re.compile(r"^([a-zA-Z0-9]+)\.pgn\.gz\Z")


def decode_pgn_upload(text: str) -> bytes:
    """The gzip bytes of an upload_pgn body, or BadRequest saying what is wrong."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("pgn is not valid base64") from None
    if not data:
        raise BadRequest("pgn is empty")
    if len(data) > MAX_PGN_GZIP_BYTES:
        raise BadRequest(f"pgn is larger than {MAX_PGN_GZIP_BYTES} bytes compressed")
    if not data.startswith(GZIP_MAGIC):
        raise BadRequest("pgn is not gzip data")
    check_gzip(data)
    return data


def check_gzip(data: bytes) -> None:
    """Decompress every member, discarding the output, under a size cap."""
    for _ in gzip_text(data):
        pass


def gzip_text(data: bytes) -> Iterator[bytes]:
    """The text of every gzip member of `data`, a chunk of at most 1 MiB at a
    time; BadRequest past MAX_PGN_TEXT_BYTES or on data that is not gzip."""
    remaining, total = data, 0
    while remaining:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while remaining and not inflater.eof:
                chunk = inflater.decompress(remaining, 1024 * 1024)
                total += len(chunk)
                if total > MAX_PGN_TEXT_BYTES:
                    raise BadRequest(f"pgn is larger than {MAX_PGN_TEXT_BYTES} bytes")
                yield chunk
                remaining = inflater.unconsumed_tail
        except zlib.error:
            raise BadRequest("pgn is not valid gzip data") from None
        if not inflater.eof:
            raise BadRequest("pgn gzip data is truncated")
        remaining = inflater.unused_data


ARCHIVE_LEVEL = 6  # zlib's default: archives are downloaded rarely, kept long


def parse_task_pgn_name(name: str) -> tuple[str, int]:
    """`<run>-<task>`, bare or with a suffix such as `.pgn` -> (run_id, task_id);
    NotFound for anything else."""
    match = _TASK_PGN_NAME.match(name)
    if match is None:
        raise NotFound(f"No PGN named {name}")
    return match.group(1), int(match.group(2))


def parse_run_pgns_name(name: str) -> str:
    match = _RUN_PGNS_NAME.match(name)
    if match is None:
        raise NotFound(f"No PGN archive named {name}")
    return match.group(1)


class PgnArchive:
    """Runs in the threadpool: every method does database I/O."""

    def __init__(self, storage: Storage, clock: Callable[[], float] = time.time) -> None:
        self._storage = storage
        self._clock = clock

    def store(self, run_id: str, task_id: int, pgn_zip: bytes) -> None:
        with self._storage.write() as tx:
            tx.pgns.put(run_id, task_id, pgn_zip, self._clock())

    def task_pgn(self, run_id: str, task_id: int) -> bytes:
        with self._storage.read() as tx:
            data = tx.pgns.get(run_id, task_id)
        if data is None:
            raise NotFound(f"No PGN for task {run_id}/{task_id}")
        return data

    def run_task_ids(self, run_id: str) -> list[int]:
        """Task ids with a stored PGN, NotFound when the run has none."""
        with self._storage.read() as tx:
            stored = tx.pgns.list_for_run(run_id)
        if not stored:
            raise NotFound(f"No PGNs for run {run_id}")
        return [info.task_id for info in stored]

    def run_archive(self, run_id: str, task_ids: list[int]) -> Iterator[bytes]:
        """Every task's games as one gzip member, compressed a chunk at a time,
        so memory stays at one task's PGN. A task's text that does not end its
        line gets one, so its last game and the next task's first stay apart.

        A PGN deleted between listing and reading is skipped: the archive
        stays a valid gzip file either way.
        """
        deflater = zlib.compressobj(ARCHIVE_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        for task_id in task_ids:
            with self._storage.read() as tx:
                data = tx.pgns.get(run_id, task_id)
            if data is None:
                continue
            last = b""
            for text in gzip_text(data):
                last = text or last
                if packed := deflater.compress(text):
                    yield packed
            if last and not last.endswith(b"\n"):
                yield deflater.compress(b"\n\n")
        yield deflater.flush()

    def delete_run(self, run_id: str) -> int:
        with self._storage.write() as tx:
            return tx.pgns.delete_for_run(run_id)

    def expire(self, retention_days: int) -> int:
        """Delete the PGNs uploaded more than `retention_days` ago (0: keep them
        all), oldest first, EXPIRE_BATCH to a transaction so uploads never wait
        long, at most EXPIRE_BATCHES a call (the job comes back for the rest).
        Returns how many went. [job executor]"""
        if retention_days <= 0:
            return 0
        cutoff = self._clock() - retention_days * DAY
        deleted = 0
        for _ in range(EXPIRE_BATCHES):
            with self._storage.write() as tx:
                gone = tx.pgns.delete_uploaded_before(cutoff, EXPIRE_BATCH)
            deleted += gone
            if gone < EXPIRE_BATCH:
                break
        if deleted:
            log.info("deleted %d PGNs uploaded over %d days ago", deleted, retention_days)
        return deleted
