"""Files over the API: task PGNs, nets and opening books.

Downloads are public and work on every instance that shares the data dir;
uploads need a bearer token and the primary. Upload bodies stream to a
staging file (each chunk written in the threadpool) and never sit in memory.

Uploaded bytes are served from the site's own origin, so every download is an
attachment of a type no browser runs, under a CSP that allows nothing (and
nosniff, from the middleware): a PGN or net crafted as HTML stays a file.
"""

import re
from typing import Any
from urllib.parse import quote

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse

from arbiter.domain.files.pgns import parse_run_pgns_name, parse_task_pgn_name
from arbiter.domain.files.staging import StagedUpload, StagingFile
from arbiter.domain.files.worker_package import WorkerPackage
from arbiter.storage.records import BookRecord, NetRecord
from arbiter.web.api import app_state
from arbiter.web.downloads import stored_file_response
from arbiter.web.errors import ApiError
from arbiter.web.jsonio import json_reply
from arbiter.web.middleware import is_head_request
from arbiter.web.runs_api import bearer_user, require_primary

_PLAIN_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,200}")
_DOWNLOAD_CSP = "default-src 'none'; sandbox"


def _attachment(name: str) -> dict[str, str]:
    """Download headers for a file named `name` (taken from the path: any text).

    Only a plain name goes between quotes; any other is percent-encoded
    (RFC 6266 filename*), so no quote, newline or other byte of the path can
    end up raw in a header.
    """
    if _PLAIN_FILENAME.fullmatch(name):
        disposition = f'attachment; filename="{name}"'
    else:
        disposition = "attachment; filename*=UTF-8''" + quote(name, safe="")
    return {"content-disposition": disposition, "content-security-policy": _DOWNLOAD_CSP}


# ---------------------------------------------------------------- PGNs


async def task_pgn(request: Request) -> Response:
    """One task's games: the stored gzip member, sent as gzip-encoded PGN text."""
    name = str(request.path_params["name"])
    run_id, task_id = parse_task_pgn_name(name)
    data = await run_in_threadpool(app_state(request).pgns.task_pgn, run_id, task_id)
    headers = {**_attachment(name), "content-encoding": "gzip"}
    return Response(data, media_type="application/x-chess-pgn", headers=headers)


async def run_pgns(request: Request) -> Response:
    """Every task's games of a run, as one .pgn.gz (one gzip member), streamed."""
    name = str(request.path_params["name"])
    run_id = parse_run_pgns_name(name)
    archive = app_state(request).pgns
    task_ids = await run_in_threadpool(archive.run_task_ids, run_id)
    # A sync iterator: Starlette pulls each member in the threadpool.
    chunks = archive.run_archive(run_id, task_ids)
    return StreamingResponse(chunks, media_type="application/gzip", headers=_attachment(name))


# ---------------------------------------------------------------- uploads


async def _receive_upload(request: Request) -> StagedUpload:
    """Stream the body into a staging file under the data dir, hashing it."""
    state = app_state(request)
    directory = state.settings.data_dir / "staging"
    limit = state.settings.max_upload_bytes
    staging = await run_in_threadpool(StagingFile, directory, limit)
    try:
        async for chunk in request.stream():
            await run_in_threadpool(staging.write, chunk)
            if staging.too_large:
                raise ApiError(413, f"the file is larger than {limit} bytes")
        return await run_in_threadpool(staging.finish)
    except BaseException:
        with anyio.CancelScope(shield=True):  # clean up even when the client went away
            await run_in_threadpool(staging.abort)
        raise


def _upload_name(request: Request) -> str:
    name = request.query_params.get("name", "").strip()
    if not name:
        raise ApiError(400, "name: give the file name as ?name=<file name>")
    return name


def _declared_size(request: Request) -> int:
    length = request.headers.get("content-length", "")
    return int(length) if length.isdecimal() else 0


async def upload_net(request: Request) -> Response:
    require_primary(request)
    user = await bearer_user(request)
    name = _upload_name(request)
    nets = app_state(request).nets
    await run_in_threadpool(nets.check_quota, user.username, _declared_size(request))
    staged = await _receive_upload(request)
    net = await run_in_threadpool(nets.add, user.username, name, staged)
    return json_reply(request, _net_json(net))


async def upload_book(request: Request) -> Response:
    require_primary(request)
    user = await bearer_user(request)
    name = _upload_name(request)
    books = app_state(request).books
    await run_in_threadpool(books.check_quota, user.username, _declared_size(request))
    staged = await _receive_upload(request)
    book = await run_in_threadpool(books.add, user.username, name, staged)
    return json_reply(request, {"name": book.name, **_book_json(book)})


# ---------------------------------------------------------------- nets


def _net_json(net: NetRecord) -> dict[str, Any]:
    return {
        "name": net.name,
        "user": net.username,
        "sha256": net.sha256,
        "size": net.size,
        "uploaded": net.uploaded_at,
        "downloads": net.downloads,
        "is_master": net.is_master,
    }


async def list_nets(request: Request) -> Response:
    nets = await run_in_threadpool(app_state(request).nets.list)
    return json_reply(request, {"nets": [_net_json(net) for net in nets]})


async def download_net(request: Request) -> Response:
    name = str(request.path_params["name"])
    # A HEAD only asks about the net: it is not a download.
    count = not is_head_request(request.scope)
    state = app_state(request)
    _net, stored = await run_in_threadpool(state.nets.open_for_download, name, count=count)
    return await stored_file_response(request, state.nets.files, stored, _download_headers(name))


# ---------------------------------------------------------------- books


def _book_json(book: BookRecord) -> dict[str, Any]:
    return {
        "sri": book.sri,
        "size": book.size,
        "total": book.total,
        "user": book.username,
        "hosted": True,
    }


async def list_books(request: Request) -> Response:
    """Catalogue books in books.json's form plus `"hosted": false`; books hosted
    here (a hosted copy of a catalogue book included) with their upload facts."""
    library = app_state(request).books
    hosted = await run_in_threadpool(library.list)
    listed = {book.name: {**book.entry(), "hosted": False} for book in library.catalogue()}
    listed.update({book.name: _book_json(book) for book in hosted})
    return json_reply(request, {"books": listed})


async def download_book(request: Request) -> Response:
    name = str(request.path_params["name"])
    state = app_state(request)
    _book, stored = await run_in_threadpool(state.books.open_for_download, name)
    return await stored_file_response(request, state.books.files, stored, _download_headers(name))


# ---------------------------------------------------------------- the worker's own package


def _worker_package(request: Request) -> WorkerPackage:
    package = app_state(request).worker_package
    if package is None:
        raise ApiError(404, "this server publishes no worker package")
    return package


async def worker_package_info(request: Request) -> Response:
    """What GET /api/worker/package serves: version, protocol, filename, sha256, size."""
    return json_reply(request, _worker_package(request).describe())


async def download_worker_package(request: Request) -> Response:
    """The worker wheel this server was installed with (the workers' self-update)."""
    return _wheel(_worker_package(request))


async def download_worker_wheel(request: Request) -> Response:
    """The same wheel under its own file name (`package.json`'s `filename`), the
    address pip installs from: it reads the package's name and version from
    the URL's last part, so `/api/worker/package` will not do."""
    package = _worker_package(request)
    if request.path_params["filename"] != package.filename:
        raise ApiError(404, f"this server's worker package is {package.filename}")
    return _wheel(package)


def _wheel(package: WorkerPackage) -> Response:
    return FileResponse(
        package.path, media_type="application/zip", headers=_attachment(package.filename)
    )


def _download_headers(name: str) -> dict[str, str]:
    return {"content-type": "application/octet-stream", **_attachment(name)}
