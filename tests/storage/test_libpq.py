"""The database URLs operators write: one host, or a primary and its replicas
in libpq's multi-host form, for SQLAlchemy's engine and for the lease's own
libpq connection."""

import pytest

from arbiter.storage.engine import normalize_url, supported_url
from arbiter.storage.libpq import libpq_conninfo


@pytest.mark.parametrize(
    ("written", "normalized"),
    [
        ("postgresql://bob@db:5432/arbiter", "postgresql+psycopg://bob@db:5432/arbiter"),
        (
            "postgres://bob@db/arbiter?sslmode=require",
            "postgresql+psycopg://bob@db/arbiter?sslmode=require",
        ),
        (
            "postgresql://bob@h1:5432,h2:5433/arbiter?target_session_attrs=read-write",
            "postgresql+psycopg://bob@/arbiter?host=h1%3A5432&host=h2%3A5433"
            "&target_session_attrs=read-write",
        ),
        ("postgresql://h1,h2/arbiter", "postgresql+psycopg:///arbiter?host=h1&host=h2"),
        ("sqlite:////srv/arbiter.db", "sqlite:////srv/arbiter.db"),
    ],
)
def test_urls_are_normalized_for_our_driver(written: str, normalized: str) -> None:
    assert normalize_url(written) == normalized


@pytest.mark.parametrize(
    ("written", "conninfo"),
    [
        (
            "postgresql://postgres@127.0.0.1:5432,127.0.0.1:5433/postgres"
            "?target_session_attrs=read-write",
            "target_session_attrs=read-write host=127.0.0.1,127.0.0.1 port=5432,5433"
            " user=postgres dbname=postgres",
        ),
        (
            "postgresql://bob:s%40cret@db1,db2:6000/arbiter",
            "host=db1,db2 port=,6000 user=bob password=s@cret dbname=arbiter",
        ),
        ("postgresql://bob@db:5432/arbiter", "host=db port=5432 user=bob dbname=arbiter"),
        ("postgresql://bob@/arbiter?host=/run/pg", "host=/run/pg user=bob dbname=arbiter"),
    ],
)
def test_the_lease_connects_to_the_same_hosts(written: str, conninfo: str) -> None:
    assert libpq_conninfo(supported_url(written)) == conninfo
