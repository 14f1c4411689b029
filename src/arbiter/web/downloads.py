"""Serving a net or a book from its `FileStore`: ETag, conditional and Range requests.

`If-None-Match` with the file's ETag answers 304; one byte range
(`bytes=a-b`, `bytes=a-`, `bytes=-n`) answers 206 with only the chunks it
covers (an `If-Range` that is not the current ETag gets the whole file);
several ranges get the whole file (allowed by RFC 9110 14.2); a range past the
end answers 416. The body is streamed one chunk at a time, each read in the
threadpool (and hash-checked the first time the store reads it), so a
download holds one chunk of memory; a range reads only the bytes it covers
of a chunk already checked.
"""

import re
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from arbiter.domain.files.stored import CHUNK_BYTES, DamagedFile, FileStore, Span, StoredFile
from arbiter.web.errors import ApiError
from arbiter.web.middleware import is_head_request

_RANGE = re.compile(r"bytes=(\d{0,19})-(\d{0,19})")


async def stored_file_response(
    request: Request, files: FileStore, file: StoredFile, headers: dict[str, str]
) -> Response:
    etag = f'"{file.etag}"'
    common = {**headers, "etag": etag, "accept-ranges": "bytes"}
    if etag in _tags(request.headers.get("if-none-match", "")):
        return Response(status_code=304, headers={"etag": etag})
    wanted = _wanted_range(request, etag, file.size)
    if wanted == "unsatisfiable":
        return Response(
            status_code=416, headers={**common, "content-range": f"bytes */{file.size}"}
        )
    start, end, status = (0, file.size - 1, 200) if wanted is None else (*wanted, 206)
    common["content-length"] = str(max(0, end - start + 1))
    if status == 206:
        common["content-range"] = f"bytes {start}-{end}/{file.size}"
    if is_head_request(request.scope) or file.size == 0:
        return Response(status_code=status, headers=common)
    # The first chunk is read before the reply starts, so a file whose bytes are
    # missing or damaged is a clean JSON error rather than a cut-off download.
    pieces = _pieces(start, end)
    try:
        first = await run_in_threadpool(files.read_chunk, file, *pieces[0])
    except DamagedFile as error:
        raise ApiError(500, f"{error}: the server's copy is damaged") from None
    body = _body(files, file, pieces, first)
    return StreamingResponse(body, status_code=status, headers=common)


def _pieces(start: int, end: int) -> list[tuple[int, Span]]:
    """The chunks bytes start..end (inclusive) cover, each with the span of it
    they want (None: all of it)."""
    first, last = start // CHUNK_BYTES, end // CHUNK_BYTES
    pieces: list[tuple[int, Span]] = []
    for seq in range(first, last + 1):
        low = start - seq * CHUNK_BYTES if seq == first else 0
        high = end - seq * CHUNK_BYTES + 1 if seq == last else CHUNK_BYTES
        pieces.append((seq, None if (low, high) == (0, CHUNK_BYTES) else (low, high)))
    return pieces


async def _body(
    files: FileStore, file: StoredFile, pieces: list[tuple[int, Span]], first: bytes
) -> AsyncIterator[bytes]:
    yield first
    for seq, span in pieces[1:]:
        yield await run_in_threadpool(files.read_chunk, file, seq, span)


def _tags(header: str) -> set[str]:
    tags = {part.strip().removeprefix("W/") for part in header.split(",")}
    return tags - {""}


def _wanted_range(request: Request, etag: str, size: int) -> tuple[int, int] | str | None:
    """(start, end) inclusive, None for the whole file, or "unsatisfiable"."""
    header = request.headers.get("range")
    if header is None:
        return None
    if_range = request.headers.get("if-range")
    if if_range is not None and if_range.strip() != etag:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None or match.groups() == ("", ""):
        return None  # several ranges or another unit: the whole file
    first, last = match.groups()
    return _byte_range(first, last, size)


def _byte_range(first: str, last: str, size: int) -> tuple[int, int] | str:
    if not first:  # the last n bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    start = int(first)
    if start >= size or (last and int(last) < start):
        return "unsatisfiable"
    return start, min(int(last), size - 1) if last else size - 1
