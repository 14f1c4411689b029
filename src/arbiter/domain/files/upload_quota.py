"""How much one account may upload: nets and books together, at most `files`
files and `size` bytes in any 24 hours (ARBITER_UPLOAD_QUOTA_FILES and
ARBITER_UPLOAD_QUOTA_BYTES; 0 lifts either).

Every upload may be 200 MiB, so without a quota one account could fill the
server's disk or bucket. The quota is checked twice: before the body is
received (nothing is read from an account already at its quota) and in the
transaction that records the file, with its real size, so uploads racing each
other cannot pass it together. The refusal is a RetryLater (429) that says
when the oldest upload of the day stops counting. Operators' commands
(`arbiter books`, the Fishtest import) pass no quota. [THREAD]: it reads the
database.
"""

import math
from dataclasses import dataclass

from arbiter.domain.errors import UploadQuotaReached, ValidationError
from arbiter.storage import Tx
from arbiter.storage.records import UploadTally

QUOTA_WINDOW = 24 * 3600


@dataclass(frozen=True, slots=True)
class UploadQuota:
    files: int = 50
    size: int = 5 * 1024**3

    def check(self, tx: Tx, username: str, now: float, adding: int = 0) -> None:
        """Raise UploadQuotaReached unless one more file of `adding` bytes fits."""
        if not self.files and not self.size:
            return
        if self.size and adding > self.size:
            raise ValidationError(
                "file",
                f"The file is larger than the {_size(self.size)} one account may upload a day",
            )
        since = now - QUOTA_WINDOW
        tally = tx.nets.uploaded_by(username, since) + tx.books.uploaded_by(username, since)
        wait = QUOTA_WINDOW - (now - tally.oldest) if tally.oldest is not None else 0.0
        if self.files and tally.files >= self.files:
            raise UploadQuotaReached(wait, _too_many(self.files, wait))
        if self.size and tally.size + adding > self.size:
            raise UploadQuotaReached(wait, _too_large(tally, adding, self.size, wait))


NO_QUOTA = UploadQuota(files=0, size=0)


def _too_many(files: int, wait: float) -> str:
    return (
        f"You have uploaded {files} files in the last 24 hours, as many as one account may; "
        f"the next may be uploaded in {_hours(wait)}."
    )


def _too_large(tally: UploadTally, adding: int, size: int, wait: float) -> str:
    return (
        f"This upload ({_size(adding)}) would bring your uploads of the last 24 hours to "
        f"{_size(tally.size + adding)}, more than the {_size(size)} one account may; "
        f"the oldest of them stops counting in {_hours(wait)}."
    )


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} bytes"


def _hours(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
