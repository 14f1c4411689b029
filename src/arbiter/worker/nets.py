"""Neural networks an engine needs: found, downloaded, hash-checked.

Nets are named `nn-<first 12 hex of sha256>.nnue`, so every download is
checked against its own name. The run's `base_nets`/`new_nets` are required;
the `EvalFile*` defaults an engine announces over UCI are fetched when the
server has them, and otherwise left to the engine (which may embed its
net: Debian's Stockfish does). Engines run with the nets directory as their
working directory, where Stockfish looks for its default nets.
Blocking (network, a child process): the task's thread.
"""

import hashlib
import logging
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from arbiter.worker.client import ApiClient, NotFoundError, TransportError
from arbiter.worker.errors import WorkerError

log = logging.getLogger("arbiter.worker.nets")

NET_NAME = re.compile(r"nn-([0-9a-f]{12})\.nnue")
UCI_SECONDS = 30.0
KEEP_NETS = 10


def engine_default_nets(engine: Path, cwd: Path) -> list[str]:
    """The net names of the engine's `EvalFile*` options' defaults."""
    try:
        done = subprocess.run(  # noqa: S603 - the engine we built
            [str(engine)],
            input="uci\nquit\n",
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=UCI_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise WorkerError(f"{engine.name} does not answer `uci`: {error}") from None
    names = []
    for line in done.stdout.splitlines():
        if line.startswith("option name EvalFile") and " default " in line:
            default = line.rsplit(" default ", 1)[1].strip()
            if NET_NAME.fullmatch(default):
                names.append(default)
    return names


def net_matches(name: str, data: bytes) -> bool:
    match = NET_NAME.fullmatch(name)
    return match is not None and hashlib.sha256(data).hexdigest()[:12] == match.group(1)


def ensure_nets(
    client: ApiClient,
    directory: Path,
    missing: set[str],
    *,
    required: Iterable[str],
    optional: Iterable[str],
) -> None:
    """Have every required net (WorkerError otherwise) and every optional one the
    server holds, verified, in `directory`. `missing` remembers optional nets
    the server lacked, so they are asked for once per worker process."""
    directory.mkdir(parents=True, exist_ok=True)
    required_set = set(required)
    for name in sorted(required_set | (set(optional) - missing)):
        try:
            _ensure(client, directory, name)
        except (NotFoundError, TransportError) as error:
            if name in required_set:
                raise WorkerError(f"net {name}: {error}") from None
            missing.add(name)
            log.info("net %s: not on the server (%s); the engine's own is used", name, error)
    prune_nets(directory)


def _ensure(client: ApiClient, directory: Path, name: str) -> None:
    if not NET_NAME.fullmatch(name):
        raise WorkerError(f"{name!r} is not a net name (nn-<12 hex>.nnue)")
    path = directory / name
    if path.exists():
        path.touch()
        return
    data = client.get(f"/api/nn/{name}")
    if not net_matches(name, data):
        raise WorkerError(f"net {name}: the download does not match the hash in its name")
    temporary = path.with_name(name + ".part")
    temporary.write_bytes(data)
    temporary.replace(path)
    log.info("downloaded net %s (%d bytes)", name, len(data))


def prune_nets(directory: Path, keep: int = KEEP_NETS) -> None:
    nets = sorted(directory.glob("nn-*.nnue"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in nets[keep:]:
        stale.unlink(missing_ok=True)
