"""Helpers for the file tests: staged uploads made the way the web layer makes them."""

from pathlib import Path

from arbiter.domain.files.staging import StagedUpload, StagingFile
from arbiter.domain.files.stored import StoredFile, chunk_count, read_chunk
from arbiter.storage import Storage


def stage(directory: Path, data: bytes, limit: int = 1 << 30) -> StagedUpload:
    staging = StagingFile(directory / "staging", limit)
    for start in range(0, len(data), 4096):
        staging.write(data[start : start + 4096])
    return staging.finish()


def staged_files(directory: Path) -> list[Path]:
    return sorted((directory / "staging").glob("*"))


def stored_bytes(storage: Storage, file: StoredFile) -> bytes:
    """A stored file read back whole, chunk by checked chunk, as a download reads it."""
    return b"".join(read_chunk(storage, file, seq) for seq in range(chunk_count(file.size)))
