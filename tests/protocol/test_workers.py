"""Worker names (reference 1.1)."""

import pytest

from arbiter.protocol.messages import RequestTaskRequest, decode_body
from arbiter.protocol.workers import (
    is_short_worker_name,
    long_worker_name,
    short_worker_name,
    worker_names,
)
from tests.protocol.test_messages import worker_info

KEY = "a1b2c3d4-1234-5678-9abc-def012345678"


def test_long_name() -> None:
    assert long_worker_name("alice", 8, KEY, False) == "alice-8cores-a1b2c3d4-1234"


def test_long_name_marks_modified_workers() -> None:
    assert long_worker_name("alice", 8, KEY, True) == "alice-8cores-a1b2c3d4-1234*"


def test_short_name() -> None:
    assert short_worker_name("alice", 8, KEY) == "alice-8cores-a1b2c3d4"


def test_short_name_survives_a_new_uuid() -> None:
    # A restarted worker keeps its prefix but gets new UUID groups.
    other = "a1b2c3d4-ffff-0000-1111-222233334444"
    assert short_worker_name("alice", 8, KEY) == short_worker_name("alice", 8, other)
    assert long_worker_name("alice", 8, KEY, False) != long_worker_name("alice", 8, other, False)


def test_names_from_worker_info() -> None:
    payload = {"password": "p", "worker_info": worker_info(concurrency=3, modified=True)}
    info = decode_body(payload, RequestTaskRequest).worker_info
    assert worker_names(info) == ("alice-3cores-a1b2c3d4-1234*", "alice-3cores-a1b2c3d4")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice-8cores-a1b2c3d4", True),
        ("Ab-1cores-xY", True),
        ("alice-8cores-a1b2c3d4-1234", False),
        ("alice-0cores-a1b2c3d4", False),
        ("a-8cores-a1b2c3d4", False),
        ("alice-8cores-a1b2c3d4x", False),
        ("alice-8cores-a", False),
        ("../etc-8cores-ab", False),
        ("alice-8cores-a1b2c3d4\n", False),
    ],
)
def test_is_short_worker_name(text: str, expected: bool) -> None:
    assert is_short_worker_name(text) is expected
