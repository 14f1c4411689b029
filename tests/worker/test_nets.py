"""Nets: found in the engine's UCI options, downloaded, checked against their names."""

import hashlib
from pathlib import Path

import pytest

from arbiter.worker.errors import WorkerError
from arbiter.worker.nets import engine_default_nets, ensure_nets, net_matches, prune_nets
from tests.worker.fakes import FakeServer
from tests.worker.support import STOCKFISH, needs_stockfish

DATA = b"a network"
NAME = f"nn-{hashlib.sha256(DATA).hexdigest()[:12]}.nnue"


def test_names_carry_the_hash() -> None:
    assert net_matches(NAME, DATA)
    assert not net_matches(NAME, DATA + b"!")
    assert not net_matches("net.bin", DATA)


def test_download_once_and_verify(tmp_path: Path) -> None:
    server = FakeServer()
    server.files[f"/api/nn/{NAME}"] = DATA
    missing: set[str] = set()
    client = server.client()
    ensure_nets(client, tmp_path, missing, required=[NAME], optional=[])
    ensure_nets(client, tmp_path, missing, required=[NAME], optional=[])
    assert (tmp_path / NAME).read_bytes() == DATA
    assert server.paths() == [f"/api/nn/{NAME}"]


def test_a_corrupt_download_is_refused(tmp_path: Path) -> None:
    server = FakeServer()
    server.files[f"/api/nn/{NAME}"] = b"something else"
    with pytest.raises(WorkerError, match="does not match"):
        ensure_nets(server.client(), tmp_path, set(), required=[NAME], optional=[])
    assert not (tmp_path / NAME).exists()


def test_required_nets_must_exist_optional_ones_may_not(tmp_path: Path) -> None:
    server = FakeServer()
    client = server.client()
    with pytest.raises(WorkerError, match=NAME):
        ensure_nets(client, tmp_path, set(), required=[NAME], optional=[])
    missing: set[str] = set()
    ensure_nets(client, tmp_path, missing, required=[], optional=[NAME])
    ensure_nets(client, tmp_path, missing, required=[], optional=[NAME])
    assert missing == {NAME}
    assert server.paths() == [f"/api/nn/{NAME}"] * 2  # the failed required one, then once


def test_prune(tmp_path: Path) -> None:
    for n in range(4):
        (tmp_path / f"nn-{n:012x}.nnue").write_bytes(b"x")
    prune_nets(tmp_path, keep=1)
    assert len(list(tmp_path.iterdir())) == 1


def test_stockfish_announces_its_default_net(tmp_path: Path) -> None:
    needs_stockfish()
    names = engine_default_nets(Path(STOCKFISH), tmp_path)
    assert len(names) == 1
    assert names[0].startswith("nn-")
