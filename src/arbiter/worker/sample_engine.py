"""A sample engine repository for `arbiter demo` and the end-to-end tests.

It holds no chess code: `make build` in `src/` copies `engine.py`, a small
UCI proxy around an installed Stockfish (Debian's), to `src/stockfish`. The
proxy answers every `go` with a search of a fixed number of nodes, whatever
clock the worker sends, so games last a fraction of a second. Two branches
differ only in that number: `master` searches BASE_NODES nodes, `stronger`
STRONGER_NODES, which is worth a few hundred Elo at these depths: an SPRT
decides within a few dozen games.
"""

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BASE_NODES = 300
STRONGER_NODES = 1500
STOCKFISH_CANDIDATES = ("stockfish", "/usr/games/stockfish")

MAKEFILE = """\
# Arbiter's build contract: `make build` leaves an executable `stockfish` here.
build:
\tcp engine.py stockfish
\tchmod +x stockfish

.PHONY: build
"""

ENGINE = '''\
#!/usr/bin/env python3
"""Sample engine: {real} with every search limited to {nodes} nodes."""
import os
import subprocess
import sys

REAL = {real!r}
NODES = {nodes}

if len(sys.argv) > 1:  # `stockfish bench ...`: the real engine's own bench
    os.execv(REAL, [REAL, *sys.argv[1:]])
engine = subprocess.Popen([REAL], stdin=subprocess.PIPE, text=True, bufsize=1)
for line in sys.stdin:
    if line.startswith("go"):
        line = f"go nodes {{NODES}}\\n"
    engine.stdin.write(line)
    engine.stdin.flush()
    if line.strip() == "quit":
        break
engine.stdin.close()
sys.exit(engine.wait())
'''


@dataclass(frozen=True, slots=True)
class SampleRepo:
    path: Path
    url: str  # file:// URL, as a run's tests_repo
    base_branch: str = "master"
    new_branch: str = "stronger"


def usable_stockfish(command: str) -> str | None:
    """The Stockfish the sample engine wraps, or None once `command`'s refusal
    has named what to install (git and make are needed too)."""
    real = find_stockfish()
    missing = [tool for tool in ("git", "make") if shutil.which(tool) is None]
    missing += [] if real else ["stockfish"]
    if real is None or missing:
        needs = " ".join(missing)
        print(f"arbiter {command} needs {needs}: apt-get install {needs}", file=sys.stderr)
        return None
    return real


def find_stockfish() -> str | None:
    for candidate in STOCKFISH_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return str(Path(found).resolve())
    return None


def make_sample_repo(path: Path, real_engine: str) -> SampleRepo:
    """Create the repository with its two branches (git and make are needed later)."""
    (path / "src").mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=master")
    (path / "src" / "Makefile").write_text(MAKEFILE)
    write_engine(path, real_engine, BASE_NODES)
    commit(path, f"sample engine: {BASE_NODES} nodes per move")
    git(path, "checkout", "--quiet", "-b", "stronger")
    write_engine(path, real_engine, STRONGER_NODES)
    commit(path, f"search {STRONGER_NODES} nodes per move")
    git(path, "checkout", "--quiet", "master")
    return SampleRepo(path, path.resolve().as_uri())


def write_engine(path: Path, real_engine: str, nodes: int) -> None:
    engine = path / "src" / "engine.py"
    engine.write_text(ENGINE.format(real=real_engine, nodes=nodes))
    engine.chmod(0o755)


def commit(path: Path, message: str) -> None:
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", message)


def git(path: Path, *args: str) -> None:
    identity = ["-c", "user.name=Arbiter demo", "-c", "user.email=demo@localhost"]
    subprocess.run(  # noqa: S603 - git from PATH with our own arguments
        ["git", *identity, *args],  # noqa: S607
        cwd=path,
        check=True,
        capture_output=True,
    )
