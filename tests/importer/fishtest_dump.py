"""Fishtest mongodumps written by the tests, with the reference's document
shapes (server/fishtest/schemas.py), through pymongo's bson: no MongoDB needed."""

import gzip
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bson
from bson import ObjectId

from arbiter.stats.llr import llr, sprt_bounds
from arbiter.stats.sprt_elo import sprt_elo

T0 = datetime(2023, 5, 1, 12, 0, tzinfo=UTC)
CLEAR_PASSWORD = "tr0ub4dor&3-clear-in-fishtest"


def oid(n: int, when: datetime = T0) -> ObjectId:
    """A fixed ObjectId: the time, then n."""
    return ObjectId(f"{int(when.timestamp()):08x}{n:016x}")


def write_collection(
    directory: Path, name: str, documents: Iterable[dict[str, Any]], *, gzipped: bool = False
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = b"".join(bson.encode(document) for document in documents)
    if gzipped:
        path = directory / f"{name}.bson.gz"
        path.write_bytes(gzip.compress(data))
    else:
        path = directory / f"{name}.bson"
        path.write_bytes(data)
    (directory / f"{name}.metadata.json").write_text('{"indexes": []}')
    return path


def worker_info(user: str = "worker1", key: str = "abcd1234-0001-0002-0003-000000000004") -> dict:
    return {
        "uname": "Linux 6.1",
        "architecture": ["64bit", "ELF"],
        "concurrency": 4,
        "max_memory": 8000,
        "min_threads": 1,
        "username": user,
        "version": 325,
        "python_version": [3, 11, 2],
        "gcc_version": [12, 2, 0],
        "compiler": "g++",
        "unique_key": key,
        "modified": False,
        "worker_arch": "x86-64-avx2",
        "ARCH": "x86-64-avx2",
        "nps": 1000000.0,
        "near_github_api_limit": False,
        "remote_addr": "192.0.2.7",
        "country_code": "NL",
    }


def stats(w: int, l: int, d: int, penta: list[int] | None, crashes: int = 0) -> dict:  # noqa: E741
    found: dict[str, Any] = {"wins": w, "losses": l, "draws": d, "crashes": crashes}
    found["time_losses"] = 0
    if penta is not None:
        found["pentanomial"] = penta
    return found


def task(
    start: int, s: dict, *, active: bool = False, bad: bool = False, info: dict | None = None
) -> dict:
    return {
        "num_games": 200,
        "active": active,
        "last_updated": T0 + timedelta(hours=1),
        "start": start,
        **({"bad": True} if bad else {}),
        "stats": s,
        "worker_info": info or worker_info(),
    }


def base_args(**changes: Any) -> dict:
    args = {
        "base_tag": "master",
        "new_tag": "patch",
        "base_nets": ["nn-0123456789ab.nnue"],
        "new_nets": ["nn-0123456789ab.nnue"],
        "num_games": 400,
        "tc": "10+0.1",
        "new_tc": "10+0.1",
        "book": "UHO_Lichess_4852_v1.epd",
        "book_depth": "8",
        "threads": 1,
        "resolved_base": "a" * 40,
        "resolved_new": "b" * 40,
        "msg_base": "base",
        "msg_new": "new",
        "base_options": "Hash=16",
        "new_options": "Hash=16",
        "info": "a test",
        "base_signature": "123456",
        "new_signature": "123457",
        "username": "Alice",
        "tests_repo": "https://github.com/alice/Stockfish",
        "auto_purge": False,
        "throughput": 100,
        "itp": 100.0,
        "priority": 0.0,
        "adjudication": True,
    }
    args.update(changes)
    return args


def sprt_state(model: str, results: list[int], elo0: float = 0.0, elo1: float = 2.0) -> dict:
    lower, upper = sprt_bounds(0.05, 0.05)
    return {
        "alpha": 0.05,
        "beta": 0.05,
        "elo0": elo0,
        "elo1": elo1,
        "elo_model": model,
        "state": "",
        "llr": llr(model, elo0, elo1, results),
        "batch_size": 8,
        "lower_bound": lower,
        "upper_bound": upper,
        "overshoot": {
            "last_update": 200,
            "skipped_updates": 0,
            "ref0": 0.0,
            "m0": 0.0,
            "sq0": 0.0,
            "ref1": 0.1,
            "m1": 0.1,
            "sq1": 0.01,
        },
    }


def run(n: int, args: dict, tasks: list[dict], **fields: Any) -> dict:
    results = {"wins": 0, "losses": 0, "draws": 0, "crashes": 0, "time_losses": 0}
    penta: list[int] | None = [0, 0, 0, 0, 0]
    for t in tasks:
        for key in results:
            results[key] += t["stats"].get(key, 0)
        if penta is not None and "pentanomial" in t["stats"]:
            penta = [a + b for a, b in zip(penta, t["stats"]["pentanomial"], strict=True)]
        else:
            penta = None
    if penta is not None:
        results["pentanomial"] = penta
    document = {
        "_id": oid(n),
        "version": 24,
        "start_time": T0,
        "last_updated": T0 + timedelta(hours=2),
        "tc_base": 10.0,
        "approved": True,
        "approver": "Bob",
        "finished": True,
        "deleted": False,
        "failed": False,
        "failures": 0,
        "is_green": False,
        "is_yellow": False,
        "workers": 0,
        "cores": 0,
        "committed_games": sum(
            t["stats"]["wins"] + t["stats"]["losses"] + t["stats"]["draws"] for t in tasks
        ),
        "total_games": sum(t["num_games"] for t in tasks),
        "results": results,
        "nps": 0.0,
        "games_per_minute": 0.0,
        "args": args,
        "tasks": tasks,
        "bad_tasks": [],
    }
    document.update(fields)
    return document


def finished_message(document: dict) -> str:
    """The reference's finished_run line for an SPRT run (its numbers)."""
    sprt, r = document["args"]["sprt"], document["results"]
    counts = r.get("pentanomial") or [r["losses"], r["draws"], r["wins"]]
    if sprt["elo_model"] == "BayesElo":
        counts = [r["losses"], r["draws"], r["wins"]]
    found = sprt_elo(
        counts,
        sprt["elo0"],
        sprt["elo1"],
        sprt["elo_model"],
        ldw=[r["losses"], r["draws"], r["wins"]],
    )
    return (
        f"Result:{sprt['state']} Elo:{found.elo:.2f}[{found.ci[0]:.2f},{found.ci[1]:.2f}]"
        f" LOS:{found.los:.0%}"
    )
