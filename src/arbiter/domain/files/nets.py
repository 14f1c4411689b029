"""Neural network files: `nn-<first 12 hex of sha256>.nnue`, hash-verified.

The name is the file's identity (engines name their default net this way),
so an upload whose bytes do not hash to its name is refused, and a name is
uploaded once: a net never changes under a run that uses it.
All methods run in the threadpool (disk and database I/O). Downloads are
counted in memory (`DownloadCounts`) and written by `flush_downloads`, so a
download makes no database write.
"""

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from arbiter.domain.actions import record
from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files.download_counts import DownloadCounts
from arbiter.domain.files.staging import StagedUpload
from arbiter.domain.files.stored import NET, DatabaseFiles, FileStore, StoredFile
from arbiter.domain.files.upload_quota import NO_QUOTA, UploadQuota
from arbiter.storage import Storage, Tx
from arbiter.storage.base import NewAction
from arbiter.storage.errors import DuplicateKey
from arbiter.storage.records import NetRecord, NetSearch

NET_NAME = re.compile(r"nn-[0-9a-f]{12}\.nnue")  # fullmatch: `$` would admit a final newline
MAX_LISTED = 1000
NETS_PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class NetPage:
    nets: tuple[NetRecord, ...]
    total: int
    page: int
    pages: int


def check_net_name(name: str) -> None:
    if not NET_NAME.fullmatch(name):
        raise ValidationError("name", "A net is named nn-<first 12 hex digits of its SHA-256>.nnue")


class NetLibrary:
    def __init__(
        self,
        storage: Storage,
        clock: Callable[[], float] = time.time,
        files: FileStore | None = None,
        quota: UploadQuota = NO_QUOTA,
    ) -> None:
        self._storage = storage
        self.files = files or DatabaseFiles(storage)
        self._quota = quota
        self._clock = clock
        self.downloads = DownloadCounts(self._write_downloads)

    def check_quota(self, username: str, adding: int = 0) -> None:
        """Refuse, before its bytes are received, an upload of `adding` bytes
        for which the account's daily quota has no room."""
        with self._storage.read() as tx:
            self._quota.check(tx, username, self._clock(), adding)

    def add(self, username: str, name: str, staged: StagedUpload) -> NetRecord:
        """Verify and publish an upload; the staging file is gone afterwards either way."""
        try:
            check_net_name(name)
            _check_hash(name, staged)
            net = NetRecord(
                name=name,
                username=username,
                sha256=staged.sha256,
                size=staged.size,
                uploaded_at=self._clock(),
                downloads=0,
                is_master=False,
                first_test=None,
                last_test=None,
            )
            self._commit(net, staged)
            return net
        finally:
            staged.discard()

    def _commit(self, net: NetRecord, staged: StagedUpload) -> None:
        def write_record(tx: Tx) -> None:
            self._quota.check(tx, net.username, net.uploaded_at, adding=net.size)
            tx.nets.add(net)
            record(
                tx,
                NewAction(
                    time=net.uploaded_at,
                    action="upload_nn",
                    username=net.username,
                    message=f"{net.name} ({net.size} bytes)",
                    data={"nn": net.name},
                ),  # the reference's upload_nn names it so
            )

        already = ValidationError("name", f"{net.name} is already uploaded")
        with self._storage.read() as tx:
            if tx.nets.get(net.name) is not None:  # before sending bytes anywhere
                raise already
        try:
            # The row only once all of the bytes are kept: all of the net or nothing.
            self.files.publish(
                StoredFile(NET, net.name, net.size, net.sha256), staged.path, write_record
            )
        except DuplicateKey:
            raise already from None

    def get(self, name: str) -> NetRecord:
        with self._storage.read() as tx:
            net = tx.nets.get(name)
        if net is None:
            raise NotFound(f"Unknown net {name}")
        return self._with_pending(net)

    def list(self, limit: int = MAX_LISTED) -> list[NetRecord]:
        with self._storage.read() as tx:
            nets = tx.nets.list(limit=max(1, min(limit, MAX_LISTED)))
        return [self._with_pending(net) for net in nets]

    def search(self, found: NetSearch, page: int, per_page: int = NETS_PER_PAGE) -> NetPage:
        """Page `page` (from 1) of the nets `found` selects, newest first. [THREAD]"""
        page = max(1, page)
        with self._storage.read() as tx:
            nets, total = tx.nets.search(found, offset=(page - 1) * per_page, limit=per_page)
        pages = max(1, -(-total // per_page))
        return NetPage(tuple(self._with_pending(net) for net in nets), total, page, pages)

    def open_for_download(self, name: str, *, count: bool = True) -> tuple[NetRecord, StoredFile]:
        """The net and how to read it (`self.files.read_chunk`); a read. `count` adds
        one to the net's downloads in memory (a HEAD passes False: it downloads nothing)."""
        if not NET_NAME.fullmatch(name):
            raise NotFound(f"Unknown net {name}")
        with self._storage.read() as tx:
            net = tx.nets.get(name)
        if net is None:
            raise NotFound(f"Unknown net {name}")
        if count:
            self.downloads.count(name)
        return net, StoredFile(NET, name, net.size, net.sha256)

    def flush_downloads(self) -> int:
        """Write the downloads counted since the last flush; how many. [JOB, shutdown]"""
        return self.downloads.flush()

    def _write_downloads(self, counts: Mapping[str, int]) -> None:
        with self._storage.write() as tx:
            for name, added in sorted(counts.items()):
                tx.nets.add_downloads(name, added)

    def _with_pending(self, net: NetRecord) -> NetRecord:
        # What this process counted but has not written yet, so a listing is current.
        pending = self.downloads.pending(net.name)
        return replace(net, downloads=net.downloads + pending) if pending else net


def _check_hash(name: str, staged: StagedUpload) -> None:
    if staged.size == 0:
        raise ValidationError("file", "The file is empty")
    expected = name[3:15]
    if not staged.sha256.startswith(expected):
        raise ValidationError(
            "file",
            f"The file's SHA-256 starts with {staged.sha256[:12]}, not {expected}: "
            f"it should be named nn-{staged.sha256[:12]}.nnue",
        )
