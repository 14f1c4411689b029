"""Test engines: a scripted fake UCI engine, and Debian's Stockfish."""

import shutil
import sys
from pathlib import Path

import pytest

from arbiter.protocol.repo_policy import RepoPolicy, parse_allow

STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"

# A UCI engine in Python: legal moves from python-chess, chosen by a seeded
# generator, with faults on demand. argv: mode, after (searches before the
# fault), value (score in cp, or seconds for "slow").
FAKE_ENGINE = r"""
import random
import sys
import time

import chess

mode, after, value = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(int(sys.argv[4]))
board = chess.Board()
searches = 0
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "uci":
        print("id name Fake " + mode)
        print("option name Hash type spin default 16 min 1 max 1024")
        print("option name Threads type spin default 1 min 1 max 64")
        print("option name Skill Level type spin default 20 min 0 max 20")
        print("uciok", flush=True)
    elif words[0] == "isready":
        print("readyok", flush=True)
    elif words[0] == "position":
        if words[1] == "startpos":
            board, rest = chess.Board(), words[2:]
        else:
            board, rest = chess.Board(" ".join(words[2:8])), words[8:]
        for move in rest[1:]:
            board.push_uci(move)
    elif words[0] == "go":
        searches += 1
        faulty = searches > after
        if faulty and mode == "crash":
            sys.exit(3)
        if faulty and mode == "stall":
            continue
        if faulty and mode == "slow":
            time.sleep(value)
        if faulty and mode == "illegal":
            print("bestmove a1a8", flush=True)
            continue
        score = int(value) if mode == "score" else 0
        move = rng.choice(sorted(board.legal_moves, key=lambda m: m.uci()))
        print(f"info depth 3 score cp {score} nodes 10")
        print(f"bestmove {move.uci()}", flush=True)
    elif words[0] == "quit":
        break
"""


def fake_engine(
    directory: Path, mode: str = "play", *, after: int = 0, value: float = 0, seed: int = 1
) -> tuple[str, ...]:
    script = directory / "fake_engine.py"
    if not script.exists():
        script.write_text(FAKE_ENGINE)
    return (sys.executable, str(script), mode, str(after), str(value), str(seed))


def needs_stockfish() -> None:
    if not Path(STOCKFISH).exists():
        pytest.fail(f"Stockfish is required at {STOCKFISH}: run scripts/install-system-deps")


# The worker's repository policy for test repositories (file:// URLs).
LOCAL_REPOS = RepoPolicy(parse_allow("file"))
