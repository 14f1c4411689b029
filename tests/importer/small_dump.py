"""The small dump: every kind of document and the edge cases of old Fishtest data."""

from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.importer.fishtest_dump import (
    CLEAR_PASSWORD,
    T0,
    base_args,
    finished_message,
    oid,
    run,
    sprt_state,
    stats,
    task,
    write_collection,
)

# Run ids by what they are.
SPRT, SPSA, LIVE_SPSA, STOPPED, DELETED, FAILED, BAYES, FIXED, OLD_FIXED, SPARSE, NO_ARGS = (
    str(oid(n)) for n in range(1, 12)
)
NET_WITH_FILE = "nn-{}.nnue"  # filled with the file's hash in build()
NET_WITHOUT_FILE = "nn-00000000beef.nnue"
SPSA_FLIPS = bytes([0b10110000])


def _sprt_run() -> dict[str, Any]:
    """Finished SPRT, with a purged (bad) task and its copy in bad_tasks."""
    tasks = [
        task(0, stats(60, 40, 100, [2, 20, 50, 22, 6])),
        task(200, stats(0, 0, 0, [0, 0, 0, 0, 0]), bad=True),
        task(400, stats(58, 42, 100, [3, 21, 48, 23, 5])),
    ]
    document = run(1, base_args(), tasks, is_green=True)
    penta = document["results"]["pentanomial"]
    document["args"]["sprt"] = {**sprt_state("normalized", penta), "state": "accepted"}
    bad = task(200, stats(100, 10, 90, [0, 5, 30, 40, 25]), bad=True)
    document["bad_tasks"] = [
        {**bad, "task_id": 1, "residual": 4.2, "residual_color": "red", "active": False}
    ]
    return document


def _spsa_args(iteration: int) -> dict[str, Any]:
    return {
        "A": 5.0,
        "alpha": 0.602,
        "gamma": 0.101,
        "raw_params": "Tempo,20,0,40,4,0.0020",
        "iter": iteration,
        "num_iter": 200,
        "params": [
            {
                "name": "Tempo",
                "start": 20.0,
                "min": 0.0,
                "max": 40.0,
                "c_end": 4.0,
                "r_end": 0.002,
                "c": 6.1,
                "a_end": 0.032,
                "a": 0.5,
                "theta": 21.3,
            }
        ],
        "param_history": [
            [{"theta": 20.4, "R": 0.0021, "c": 6.5}],
            [{"theta": 21.3, "R": 0.002, "c": 6.1}],
        ],
    }


def _runs() -> list[dict[str, Any]]:
    spsa = run(2, base_args(spsa=_spsa_args(100)), [task(0, stats(70, 70, 60, [5, 20, 50, 20, 5]))])
    live_task = task(0, stats(10, 8, 10, [1, 3, 6, 3, 1]), active=True)
    live_task["spsa_params"] = {"iter": 14, "packed_flips": SPSA_FLIPS}
    live = run(
        3,
        base_args(spsa=_spsa_args(14), arch_filter="avx2"),
        [live_task],
        finished=False,
        approver="Bob",
        workers=1,
        cores=4,
        committed_games=200,
        nps=1000000.0,
        games_per_minute=12.0,
    )
    stopped = run(4, base_args(), [task(0, stats(50, 52, 98, [4, 22, 46, 24, 4]))])
    stopped["args"]["sprt"] = sprt_state("normalized", stopped["results"]["pentanomial"])
    deleted = run(5, base_args(), [task(0, stats(40, 40, 20, [5, 10, 20, 10, 5]))], deleted=True)
    deleted["args"]["sprt"] = sprt_state("logistic", deleted["results"]["pentanomial"])
    failed = run(
        6, base_args(), [task(0, stats(0, 0, 0, [0, 0, 0, 0, 0]))], failed=True, failures=3
    )
    failed["args"]["sprt"] = sprt_state("normalized", [0, 0, 0, 0, 0])
    return [_sprt_run(), spsa, live, stopped, deleted, failed, *_old_runs(), {"_id": oid(11)}]


def _old_runs() -> list[dict[str, Any]]:
    """BayesElo-era and sparse documents: no pentanomial, no approvals, no starts."""
    old_task = task(0, stats(120, 100, 180, None))
    del old_task["start"]
    bayes = run(7, base_args(), [old_task, {**task(0, stats(30, 20, 50, None)), "num_games": 100}])
    del bayes["tasks"][1]["start"]
    for key in ("approved", "approver", "tc_base", "version", "failed", "failures", "nps"):
        bayes.pop(key)
    results = bayes["results"]
    ldw = [results["losses"], results["draws"], results["wins"]]
    bayes["args"]["sprt"] = {
        "alpha": 0.05,
        "beta": 0.05,
        "elo0": -1.5,
        "elo1": 4.5,
        "state": "accepted",
        "llr": 0.0,
    }
    from arbiter.stats.llr import llr

    bayes["args"]["sprt"]["llr"] = llr("BayesElo", -1.5, 4.5, ldw)
    bayes["args"]["sprt"]["elo_model"] = "BayesElo"
    fixed = run(
        8,
        base_args(num_games=200),
        [task(0, stats(90, 50, 60, [1, 10, 40, 35, 14]))],
        is_green=True,
    )
    old_fixed = run(9, base_args(num_games=200), [task(0, stats(80, 70, 50, None))])
    sparse = run(10, {"tc": "60+0.6", "num_games": 200, "username": "carol", "new_tag": "old"}, [])
    for key in ("tc_base", "nps", "games_per_minute", "rescheduled_from", "is_green", "bad_tasks"):
        sparse.pop(key, None)
    return [bayes, fixed, old_fixed, sparse]


def _users() -> list[dict[str, Any]]:
    def user(n: int, name: str, **fields: Any) -> dict[str, Any]:
        return {
            "_id": oid(100 + n),
            "username": name,
            "password": CLEAR_PASSWORD,
            "registration_time": T0 - timedelta(days=n),
            "pending": False,
            "blocked": False,
            "email": f"{name.lower()}@example.org",
            "groups": [],
            "tests_repo": f"https://github.com/{name}/Stockfish",
            "machine_limit": 16,
            **fields,
        }

    sparse = {"_id": oid(105), "username": "oldtimer", "password": CLEAR_PASSWORD}
    return [
        user(1, "Alice"),
        user(2, "Bob", groups=["group:approvers", "group:moderators"]),
        user(3, "pendingpat", pending=True),
        user(4, "blockedbo", blocked=True, machine_limit=4),
        sparse,
        user(6, "alice"),  # differs only in case from Alice
        user(7, "nopassword", password=""),
        {"_id": oid(108), "password": "x"},  # no username
    ]


def _actions() -> list[dict[str, Any]]:
    def action(n: int, name: str, **fields: Any) -> dict[str, Any]:
        return {"_id": oid(200 + n), "time": T0.timestamp() + n, "action": name, **fields}

    sprt_doc = _sprt_run()
    return [
        action(1, "new_run", username="Alice", run_id=SPRT, run="patch-1234567", message="new"),
        action(
            2, "approve_run", username="Bob", run_id=SPRT, run="patch-1234567", message="approved"
        ),
        action(3, "upload_nn", username="Alice", nn="nn-00000000beef.nnue"),
        action(4, "block_user", username="Bob", user="blockedbo", message="blocked"),
        action(
            5,
            "finished_run",
            username="Alice",
            run_id=SPRT,
            run="patch-1234567",
            message=finished_message(sprt_doc),
        ),
        action(6, "ancient_event", username="Alice", message="from 2014", data={"x": 1}),
        {
            "_id": oid(207),
            "action": "system_event",
            "username": "fishtest.system",
            "message": "no time",
        },
        action(
            8,
            "failed_task",
            username="worker1",
            run_id=SPRT,
            run="patch-1234567",
            task_id=0,
            worker="worker1-4cores-abcd1234-0001",
            message="crashed",
        ),
    ]


def build(directory: Path, *, gzipped: bool = False) -> Path:
    """The dump under directory/dump/fishtest_new, net files in directory/dump/nn."""
    import gzip
    import hashlib

    dump = directory / "dump"
    db = dump / "fishtest_new"
    net_bytes = b"NNUE test network bytes"
    net_name = f"nn-{hashlib.sha256(net_bytes).hexdigest()[:12]}.nnue"
    (dump / "nn").mkdir(parents=True)
    (dump / "nn" / net_name).write_bytes(net_bytes)
    collections: dict[str, list[dict[str, Any]]] = {
        "users": _users(),
        "runs": _runs(),
        "actions": _actions(),
        "nns": [
            {
                "_id": oid(301),
                "name": net_name,
                "user": "Alice",
                "downloads": 12,
                "is_master": True,
                "first_test": {"date": T0, "id": SPRT},
                "last_test": {"date": T0, "id": SPRT},
            },
            {"_id": oid(302), "name": NET_WITHOUT_FILE, "user": "Bob", "downloads": 3},
            {"_id": oid(303), "name": "../../etc/passwd", "user": "Mallory", "downloads": 0},
        ],
        "pgns": [
            {
                "_id": oid(401),
                "run_id": f"{SPRT}-0",
                "pgn_zip": gzip.compress(b'[Event "x"]\n'),
                "size": 0,
            },
            {"_id": oid(402), "run_id": f"{SPRT}-2", "pgn_zip": b"plain text", "size": 10},
        ],
        "workers": [
            {
                "_id": oid(501),
                "worker_name": "worker1-4cores-abcd1234",
                "blocked": True,
                "message": "bad results",
                "last_updated": T0,
            },
        ],
        "kvstore": [
            {"_id": "legacy_usernames", "value": ["Old Timer"]},
            {"_id": "official_master_sha", "value": "c" * 40},
        ],
        "deltas": [{"_id": oid(601), "x": 1}],
    }
    for name, documents in collections.items():
        if name == "pgns":
            for document in documents:
                document["size"] = len(document["pgn_zip"])
        write_collection(db, name, documents, gzipped=gzipped)
    return dump


def net_with_file(dump: Path) -> str:
    return next(path.name for path in (dump / "nn").iterdir())
