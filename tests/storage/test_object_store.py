"""The S3 layer against a local S3-compatible server: keys, ranges, sizes,
and every way a configuration can be wrong, each as one readable error."""

import socket
from collections.abc import Iterator
from dataclasses import replace

import pytest

from arbiter.storage.object_store import Bucket, NoSuchObject, ObjectStoreError
from tests.s3_server import S3Bucket


@pytest.fixture
def bucket(s3_bucket: S3Bucket) -> Bucket:
    return Bucket(s3_bucket.settings())


def test_an_object_is_put_read_measured_and_deleted_under_the_prefix(
    bucket: Bucket, s3_bucket: S3Bucket
) -> None:
    bucket.put_bytes("nets/a", b"0123456789")
    assert s3_bucket.object_keys() == ["arbiter/nets/a"]
    assert bucket.read("nets/a") == b"0123456789"
    assert bucket.read("nets/a", 2, 4) == b"234"
    assert bucket.size("nets/a") == 10
    assert b"".join(bucket.pieces("nets/a", 4)) == b"0123456789"
    bucket.delete("nets/a")
    assert bucket.size("nets/a") is None
    with pytest.raises(NoSuchObject):
        bucket.read("nets/a")


def test_a_reachable_bucket_passes_the_check(bucket: Bucket) -> None:
    bucket.check()


def test_a_wrong_secret_is_refused_in_words(s3_bucket: S3Bucket) -> None:
    wrong = Bucket(replace(s3_bucket.settings(), secret_access_key="not-the-secret"))
    with pytest.raises(ObjectStoreError) as refused:
        wrong.check()
    assert str(refused.value) == (
        f"object store bucket {s3_bucket.name!r} at {s3_bucket.server.endpoint} cannot be used:"
        " access denied (check the access key and secret)"
    )
    assert "not-the-secret" not in str(refused.value)


def test_a_bucket_that_does_not_exist_is_named(s3_bucket: S3Bucket) -> None:
    missing = Bucket(replace(s3_bucket.settings(), bucket="no-such-bucket"))
    with pytest.raises(ObjectStoreError, match="no bucket 'no-such-bucket' at http://127"):
        missing.check()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nobody listens on (bound and not listening: refused)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


def test_an_endpoint_nobody_answers_on_fails_fast(s3_bucket: S3Bucket, closed_port: int) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    dead = Bucket(replace(s3_bucket.settings(), endpoint=endpoint))
    with pytest.raises(ObjectStoreError, match=f"at {endpoint} cannot be used: Could not connect"):
        dead.check()
