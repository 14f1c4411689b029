"""An S3-compatible bucket, for nets' and books' bytes when the operator configures one.

A thin layer over boto3 that speaks in keys and byte ranges and turns the
client's many exceptions into two of ours: `NoSuchObject` (the key is not
there) and `ObjectStoreError` (the bucket cannot be reached or used; the
message names the endpoint and bucket, never a secret). Every method blocks on
the network: call it from the threadpool or a CLI. Short timeouts and few
retries, so a dead endpoint fails a start-up or a download in seconds.

boto3 is imported by the first Bucket: it costs 0.3 s of every process start,
and most instances have no bucket.
"""

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arbiter.storage.errors import StorageError

_MISSING = {"NoSuchKey", "404", "NotFound"}
_CODES = {"403": "access denied (check the access key and secret)", "400": "bad request"}
_MULTIPART_FROM = 64 * 1024 * 1024


class ObjectStoreError(StorageError):
    """The object store cannot be reached or refuses us; the message says which and why."""


class NoSuchObject(Exception):  # noqa: N818 - named for what happened
    """The key is not in the bucket."""


@dataclass(frozen=True, slots=True)
class BucketSettings:
    endpoint: str  # empty: AWS's own endpoint for the region
    bucket: str
    region: str = ""
    access_key_id: str = ""  # empty (with the secret): boto3's own credential chain
    secret_access_key: str = ""
    prefix: str = ""  # prepended to every key, so one bucket can hold several things

    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint or 'AWS'}"


class Bucket:
    def __init__(self, settings: BucketSettings) -> None:
        import boto3
        from botocore.config import Config

        self.settings = settings
        config = Config(
            connect_timeout=5,
            read_timeout=30,
            retries={"max_attempts": 2, "mode": "standard"},
            s3={"addressing_style": "path"},  # what S3-compatible servers accept
            # boto3's own CRC checksums only where S3 requires them: several
            # S3-compatible servers refuse the headers, and every chunk is
            # checked against its SHA-256 here anyway.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        credentials: dict[str, Any] = {}
        if settings.access_key_id or settings.secret_access_key:
            credentials = {
                "aws_access_key_id": settings.access_key_id,
                "aws_secret_access_key": settings.secret_access_key,
            }
        self._client = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.endpoint or None,
            region_name=settings.region or None,
            config=config,
            **credentials,
        )

    def check(self) -> None:
        """Reach the bucket with these credentials; ObjectStoreError otherwise."""
        try:
            with self._errors("cannot be used"):
                self._client.head_bucket(Bucket=self.settings.bucket)
        except NoSuchObject:
            raise ObjectStoreError(f"object store: no {self.settings.where()}") from None

    def put_file(self, key: str, source: Path) -> None:
        from boto3.s3.transfer import TransferConfig

        transfer = TransferConfig(multipart_threshold=_MULTIPART_FROM, max_concurrency=4)
        with self._errors(f"did not take {key}"):
            self._client.upload_file(
                str(source), self.settings.bucket, self._key(key), Config=transfer
            )

    def put_bytes(self, key: str, data: bytes) -> None:
        with self._errors(f"did not take {key}"):
            self._client.put_object(Bucket=self.settings.bucket, Key=self._key(key), Body=data)

    def read(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes, or only start..end (inclusive)."""
        ranged = {} if start is None else {"Range": f"bytes={start}-{'' if end is None else end}"}
        with self._errors(f"did not give {key}"):
            reply = self._client.get_object(
                Bucket=self.settings.bucket, Key=self._key(key), **ranged
            )
            return bytes(reply["Body"].read())

    def pieces(self, key: str, size: int) -> Iterator[bytes]:
        """The whole object in one request, `size` bytes at a time."""
        with self._errors(f"did not give {key}"):
            reply = self._client.get_object(Bucket=self.settings.bucket, Key=self._key(key))
            body = reply["Body"]
            try:
                while piece := _read_exactly(body, size):
                    yield piece
            finally:
                body.close()

    def size(self, key: str) -> int | None:
        """The object's size, None when it is not there."""
        try:
            with self._errors(f"did not describe {key}"):
                reply = self._client.head_object(Bucket=self.settings.bucket, Key=self._key(key))
        except NoSuchObject:
            return None
        return int(reply["ContentLength"])

    def delete(self, key: str) -> None:
        with self._errors(f"did not delete {key}"):
            self._client.delete_object(Bucket=self.settings.bucket, Key=self._key(key))

    def _key(self, key: str) -> str:
        return self.settings.prefix + key

    def _errors(self, doing: str) -> AbstractContextManager[None]:
        return _translated(self.settings, doing)


def _read_exactly(body: Any, size: int) -> bytes:
    """`size` bytes, fewer only at the end: a stream's read may return less."""
    piece = bytearray()
    while len(piece) < size and (more := body.read(size - len(piece))):
        piece += more
    return bytes(piece)


@contextmanager
def _translated(settings: BucketSettings, doing: str) -> Iterator[None]:
    """boto3's exceptions as NoSuchObject or one readable ObjectStoreError."""
    from botocore.exceptions import BotoCoreError, ClientError  # loaded with the Bucket

    try:
        yield
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in _MISSING:
            raise NoSuchObject(doing) from None
        message = _CODES.get(code) or error.response.get("Error", {}).get("Message") or code
        raise ObjectStoreError(f"object store {settings.where()} {doing}: {message}") from None
    except BotoCoreError as error:
        raise ObjectStoreError(f"object store {settings.where()} {doing}: {error}") from None
