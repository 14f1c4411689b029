"""worker_info as the server validates it."""

import re
from pathlib import Path

import msgspec

from arbiter.protocol.messages import UNIQUE_KEY_PATTERN, WorkerInfo, decode_body
from arbiter.protocol.workers import worker_names
from arbiter.worker.config import WorkerConfig
from arbiter.worker.host import Compiler
from arbiter.worker.identity import make_worker_info, new_unique_key, with_measurements

CONFIG = WorkerConfig(
    server="http://x",
    username="alice",
    password="p",
    concurrency=3,
    max_memory=4000,
    min_threads=1,
    uuid_prefix="box1",
    fleet=False,
    compiler="",
    data_dir=Path(),
)


def test_unique_keys_share_the_prefix_and_match_the_protocol() -> None:
    first, second = new_unique_key("box1"), new_unique_key("box1")
    assert first != second
    for key in (first, second):
        assert re.fullmatch(UNIQUE_KEY_PATTERN, key)
        assert key.startswith("box1-")


def test_worker_info_passes_the_servers_schema() -> None:
    info = make_worker_info(CONFIG, Compiler("g++", (12, 2, 0)), new_unique_key("box1"), "x86-64")
    decoded = decode_body(msgspec.to_builtins(info), WorkerInfo)
    assert decoded.gcc_version == (12, 2, 0)
    assert worker_names(decoded)[1] == "alice-3cores-box1"
    measured = with_measurements(info, arch="64bit BMI2", nps=1234567.89)
    assert (measured.ARCH, measured.nps, measured.unique_key) == (
        "64bit BMI2",
        1234567.9,
        info.unique_key,
    )


def test_an_unknown_arch_and_no_compiler_are_still_valid() -> None:
    info = make_worker_info(CONFIG, None, new_unique_key("box1"), "pdp-11")
    decoded = decode_body(msgspec.to_builtins(info), WorkerInfo)
    assert (decoded.worker_arch, decoded.gcc_version) == ("unknown", (0, 0, 0))
