"""A local S3-compatible server for the object-store tests: moto's standalone
server (the test extra) in a subprocess on 127.0.0.1, one per session, with
its IAM checks on, so a wrong secret is refused as a real store refuses it.
Each test gets a bucket of its own (`s3_bucket`). A real S3 is not reachable
from this machine; this is the stand-in the docs' "S3-compatible" means.
"""

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from arbiter.storage.object_store import BucketSettings
from tests.web.live_server import free_port

REGION = "us-east-1"
# Requests moto takes before it checks signatures: the three that create our
# IAM user, its key and its policy.
UNSIGNED_SETUP_CALLS = 3


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key_id: str
    secret_access_key: str

    def client(self, secret: str | None = None) -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=secret or self.secret_access_key,
        )


@dataclass(frozen=True)
class S3Bucket:
    server: S3Server
    name: str
    prefix: str = "arbiter/"

    def settings(self) -> BucketSettings:
        return BucketSettings(
            endpoint=self.server.endpoint,
            bucket=self.name,
            region=REGION,
            access_key_id=self.server.access_key_id,
            secret_access_key=self.server.secret_access_key,
            prefix=self.prefix,
        )

    def env(self) -> dict[str, str]:
        """The ARBITER_FILES_S3_* a server process is started with."""
        return {
            "ARBITER_FILES_S3_ENDPOINT": self.server.endpoint,
            "ARBITER_FILES_S3_BUCKET": self.name,
            "ARBITER_FILES_S3_REGION": REGION,
            "ARBITER_FILES_S3_ACCESS_KEY_ID": self.server.access_key_id,
            "ARBITER_FILES_S3_SECRET_ACCESS_KEY": self.server.secret_access_key,
            "ARBITER_FILES_S3_PREFIX": self.prefix,
        }

    def object_keys(self) -> list[str]:
        listed = self.server.client().list_objects_v2(Bucket=self.name)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def put(self, key: str, data: bytes) -> None:
        self.server.client().put_object(Bucket=self.name, Key=key, Body=data)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("s3") / "moto.log"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(UNSIGNED_SETUP_CALLS)}
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for(port, process, log)
        yield _with_user(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> S3Bucket:
    bucket = S3Bucket(s3_server, f"arbiter-{uuid.uuid4().hex[:12]}")
    s3_server.client().create_bucket(Bucket=bucket.name)
    return bucket


def _wait_for(port: int, process: "subprocess.Popen[bytes]", log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto's server exited: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto's server did not start within 60 s")


def _with_user(endpoint: str) -> S3Server:
    """An IAM user allowed everything on S3, made by the unsigned calls."""
    iam = boto3.session.Session().client(
        "iam",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )
    iam.create_user(UserName="arbiter")
    key = iam.create_access_key(UserName="arbiter")["AccessKey"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    iam.put_user_policy(UserName="arbiter", PolicyName="s3", PolicyDocument=json.dumps(policy))
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
