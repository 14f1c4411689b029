"""Neural network files: `nn-<first 12 hex of sha256>.nnue`, hash-verified.

The name is the file's identity (engines name their default net this way),
so an upload whose bytes do not hash to its name is refused, and a name is
uploaded once: a net never changes under a run that uses it.
All methods run in the threadpool (disk and database I/O).
"""

import re
import time
from collections.abc import Callable
from pathlib import Path

from arbiter.domain.actions import record
from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files.staging import StagedUpload, publish
from arbiter.storage import Storage
from arbiter.storage.errors import DuplicateKey
from arbiter.storage.records import NetRecord

NET_NAME = re.compile(r"^nn-[0-9a-f]{12}\.nnue$")
MAX_LISTED = 1000


def check_net_name(name: str) -> None:
    if not NET_NAME.match(name):
        raise ValidationError("name", "A net is named nn-<first 12 hex digits of its SHA-256>.nnue")


class NetLibrary:
    def __init__(
        self, storage: Storage, directory: Path, clock: Callable[[], float] = time.time
    ) -> None:
        self._storage = storage
        self.directory = directory
        self._clock = clock

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
        try:
            with self._storage.write() as tx:
                tx.nets.add(net)
                record(
                    tx,
                    time=net.uploaded_at,
                    action="upload_nn",
                    username=net.username,
                    message=f"{net.name} ({net.size} bytes)",
                    data={"nn": net.name},  # the reference's upload_nn names it so
                )
                # Inside the transaction: if the rename fails nothing is recorded;
                # if the commit fails the file is orphaned but a retry replaces it.
                publish(staged, self.path_of(net.name))
        except DuplicateKey:
            raise ValidationError("name", f"{net.name} is already uploaded") from None

    def path_of(self, name: str) -> Path:
        return self.directory / name

    def get(self, name: str) -> NetRecord:
        with self._storage.read() as tx:
            net = tx.nets.get(name)
        if net is None:
            raise NotFound(f"Unknown net {name}")
        return net

    def list(self, limit: int = MAX_LISTED) -> list[NetRecord]:
        with self._storage.read() as tx:
            return tx.nets.list(limit=max(1, min(limit, MAX_LISTED)))

    def open_for_download(self, name: str) -> tuple[NetRecord, Path]:
        """The net and its file; counts the download."""
        if not NET_NAME.match(name):
            raise NotFound(f"Unknown net {name}")
        path = self.path_of(name)
        with self._storage.write() as tx:
            net = tx.nets.get(name)
            if net is None or not path.is_file():
                raise NotFound(f"Unknown net {name}")
            tx.nets.count_download(name)
        return net, path


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
