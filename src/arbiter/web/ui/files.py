"""Pages for nets and opening books: lists for everyone, uploads for users.

The browser posts a multipart form; the file is copied into a staging file
(threadpool) and handed to the same domain call the API uses.
"""

from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import UploadQuotaReached, ValidationError
from arbiter.domain.files.staging import StagedUpload, StagingFile
from arbiter.storage.records import NetSearch
from arbiter.web.api import app_state
from arbiter.web.params import page_number
from arbiter.web.templating import render
from arbiter.web.ui.forms import read_upload_form, redirect, require_user, session_of

COPY_CHUNK = 1 << 20


async def nets_page(request: Request) -> Response:
    """The nets, newest first: filtered by name, uploader and master's, and paged."""
    params = request.query_params
    found = NetSearch(
        name_contains=params.get("name", "").strip()[:64],
        username=params.get("user", "").strip()[:64],
        master_only=params.get("master") == "1",
    )
    page = page_number(params.get("page", "1"))
    listed = await run_in_threadpool(app_state(request).nets.search, found, page)
    kept = {"name": found.name_contains, "user": found.username}
    if found.master_only:
        kept["master"] = "1"
    query = urlencode({key: value for key, value in kept.items() if value})
    context = {"nets": listed.nets, "listed": listed, "found": found, "query": query}
    return await render(request, "nets.html", context)


async def books_page(request: Request) -> Response:
    library = app_state(request).books
    books = await run_in_threadpool(library.list)
    context = {"books": books, "catalogue": library.catalogue(), "default": library.default_book()}
    return await render(request, "books.html", context)


async def upload_form(request: Request) -> Response:
    require_user(request)
    return await _upload_page(request, {})


async def _upload_page(request: Request, errors: dict[str, str], status: int = 200) -> Response:
    return await render(request, "upload.html", {"errors": errors}, status)


def _stage(request: Request, upload: UploadFile) -> StagedUpload:
    """Copy the parsed upload into a staging file. Threadpool: disk I/O."""
    settings = app_state(request).settings
    staging = StagingFile(settings.data_dir / "staging", settings.max_upload_bytes)
    try:
        upload.file.seek(0)
        while chunk := upload.file.read(COPY_CHUNK):
            staging.write(chunk)
        if staging.too_large:
            raise ValidationError(
                "file", f"The file is larger than {settings.max_upload_bytes} bytes"
            )
        return staging.finish()
    except BaseException:
        staging.abort()
        raise


async def _upload(request: Request, kind: str) -> Response:
    user = require_user(request)
    state = app_state(request)
    library = state.nets if kind == "net" else state.books
    try:  # before the form's bytes are read
        await run_in_threadpool(library.check_quota, user.username)
    except UploadQuotaReached as full:
        return await _upload_page(request, {f"{kind}_file": str(full)}, 429)
    fields, upload = await read_upload_form(request)
    if upload is None:
        return await _upload_page(request, {f"{kind}_file": "Choose a file."}, 400)
    name = fields.get(f"{kind}_name", "").strip() or (upload.filename or "")
    try:
        staged = await run_in_threadpool(_stage, request, upload)
        await run_in_threadpool(library.add, user.username, name, staged)
    except ValidationError as error:
        field = f"{kind}_{'file' if error.field == 'file' else 'name'}"
        return await _upload_page(request, {field: str(error)}, 400)
    except UploadQuotaReached as full:
        return await _upload_page(request, {f"{kind}_file": str(full)}, 429)
    finally:
        await upload.close()
    session_of(request).flash(f"{name} uploaded.")
    return redirect("/nns" if kind == "net" else "/books")


async def upload_net(request: Request) -> Response:
    return await _upload(request, "net")


async def upload_book(request: Request) -> Response:
    return await _upload(request, "book")
