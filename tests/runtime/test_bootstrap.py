"""Start-up's choice of where nets' and books' bytes go: the database unless a
bucket is configured, its secret read from a file when so told. Nothing here
reaches a store (a Bucket reaches one only when used)."""

import stat
from pathlib import Path

import pytest

from arbiter.domain.files.bucket_files import BucketFiles
from arbiter.domain.files.stored import DatabaseFiles
from arbiter.domain.files.worker_package import public_key_of
from arbiter.runtime.bootstrap import (
    WORKER_PROOF_KEY_FILE,
    WORKER_SIGNING_KEY_FILE,
    configured_bucket,
    file_store,
    load_worker_proofs,
    worker_signing_key,
)
from arbiter.runtime.settings import Settings, SettingsError
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine


def bucket_settings(**changes: str) -> Settings:
    return Settings(files_s3_bucket="nets", files_s3_endpoint="http://127.0.0.1:9", **changes)


def test_without_a_bucket_the_database_keeps_the_bytes(sqlite_database_url: str) -> None:
    engine = make_engine(sqlite_database_url)
    storage = Storage(engine)
    assert configured_bucket(Settings()) is None
    assert isinstance(file_store(storage, Settings()), DatabaseFiles)
    assert isinstance(file_store(storage, bucket_settings()), BucketFiles)
    engine.dispose()


def test_the_secret_is_read_from_its_file(tmp_path: Path) -> None:
    secret = tmp_path / "s3-secret"
    secret.write_text("the secret\n")
    settings = bucket_settings(
        files_s3_access_key_id="arbiter", files_s3_secret_access_key_file=str(secret)
    )
    bucket = configured_bucket(settings)
    assert bucket is not None
    assert (bucket.settings.access_key_id, bucket.settings.secret_access_key) == (
        "arbiter",
        "the secret",
    )


def test_an_unreadable_secret_file_is_a_settings_error(tmp_path: Path) -> None:
    settings = bucket_settings(
        files_s3_access_key_id="arbiter", files_s3_secret_access_key_file=str(tmp_path / "none")
    )
    with pytest.raises(SettingsError, match="ARBITER_FILES_S3_SECRET_ACCESS_KEY_FILE: cannot read"):
        configured_bucket(settings)


def test_the_worker_proof_key_is_made_once_for_this_user_alone(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    first = load_worker_proofs(settings)
    key_file = tmp_path / "data" / WORKER_PROOF_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = load_worker_proofs(settings)  # a restart: the same key, the same proofs
    assert first.of(1, 0, "h", "p") == again.of(1, 0, "h", "p")
    assert [p.name for p in key_file.parent.iterdir()] == [WORKER_PROOF_KEY_FILE]  # no draft


def test_a_worker_proof_key_file_can_be_named_and_must_hold_a_key(tmp_path: Path) -> None:
    named = tmp_path / "elsewhere.key"
    named.write_text("ab" * 32)
    settings = Settings(data_dir=tmp_path / "data", worker_proof_key_file=str(named))
    assert load_worker_proofs(settings).of(1, 0, "h", "p")
    assert not (tmp_path / "data" / WORKER_PROOF_KEY_FILE).exists()
    for text in ("zz", "abcd"):
        named.write_text(text)
        with pytest.raises(SettingsError, match="does not hold a key of 32 bytes in hex"):
            load_worker_proofs(settings)


def test_the_worker_signing_key_is_made_once_and_a_named_file_must_hold_one(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    made = public_key_of(worker_signing_key(settings))
    key_file = tmp_path / "data" / WORKER_SIGNING_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert public_key_of(worker_signing_key(settings)) == made  # a restart: the same key
    named = tmp_path / "signing.key"
    settings = Settings(data_dir=tmp_path / "data", worker_signing_key_file=str(named))
    for text in ("zz", "ab" * 33):
        named.write_text(text)
        with pytest.raises(SettingsError, match="ARBITER_WORKER_SIGNING_KEY_FILE"):
            worker_signing_key(settings)
