"""A server's database filled before it starts, for page tests that need many
runs in many states: written through the real run service on the server's own
SQLite file, then the server is started on it."""

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from arbiter.domain.accounts import User
from arbiter.domain.files.book_catalogue import REFERENCE_DEFAULT_BOOK
from arbiter.domain.files.books import AnyBook
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage, Tx
from arbiter.storage.base import NewUser
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.records import MachineHealthRecord, QuarantineRecord, evolve
from tests.domain.runs.support import submit
from tests.web.live_server import create_user

SPSA_PARAMS = "Alpha,100,0,200,10,0.0020\nBeta,50,0,100,5,0.0020"
PLAIN_FINISHED = 53  # with the green, the yellow and three coloured ones: 58, two pages of 50
WON = (0, 2, 10, 20, 18)  # pairs LL, LD, DD/WL, WD, WW: LOS far over 95%
BUSY_DIFF = (
    "diff --git a/src/search.cpp b/src/search.cpp\n"
    "--- a/src/search.cpp\n"
    "+++ b/src/search.cpp\n"
    "@@ -10,3 +10,3 @@\n"
    " int depth = 1;\n"
    "-int margin = 100;\n"
    "+int margin = 120;\n"
)
BUSY_DIFF_COMMAND = "git diff 1111111111..2222222222"


QUARANTINED = QuarantineRecord(
    "alice-8cores-0badbad0",
    True,
    time.time() - 3600,
    [
        {"run_id": f"{n:024x}", "author": author, "kind": "crashes", "detail": "12 crashes"}
        for n, author in ((1, "carol"), (2, "carol"), (3, "dave"))
    ],
    [],
)


# The health check's records: root's two machines (its profile's table).
MACHINE_HEALTH = [
    MachineHealthRecord(
        f"root-{cores}cores-0a0a0a0{cores % 10}",
        "root",
        time.time() - 600,
        {
            "runs": 12,
            "authors": 5,
            "tasks": 40,
            "games": 31_500,
            "crashes": cores,
            "time_losses": 1,
            "failed": 0,
            "silent": 1,
            "nps": 812_000.0,
            "game_nps": 655_000.0 if cores == 16 else 0.0,
            "evidence": {"crashes": ["0" * 24]} if cores == 16 else {},
        },
    )
    for cores in (8, 16)
]


@dataclass(frozen=True)
class Seeded:
    green: str  # alice's accepted SPRT (LTC), "Tune king safety"
    yellow: str
    waiting: str  # approved, no task taken yet, rescheduled from `green`
    spsa: str  # approved SPSA run
    busy: str  # approved, priority 1: the run a worker is given first
    alice_pending: str
    root_pending: str
    colours: dict[str, str]  # finished runs on the first page: id -> its result's colour


def seed(data_dir: Path, repo_url: str) -> Seeded:
    """root (the only approver), alice, dave (a signup waiting for review), and runs
    (on the catalogue's default book, which the server knows without installing)."""
    create_user(data_dir, "root", approver=True)
    create_user(data_dir, "alice")
    engine = make_engine(sqlite_url(data_dir), pool_size=2)
    try:
        storage = Storage(engine)
        with storage.write() as tx:
            tx.users.add(
                NewUser(
                    username="dave",
                    email="dave@example.org",
                    password_hash="unused",
                    registration_time=time.time(),
                    pending=True,
                    is_approver=False,
                )
            )
            tx.quarantine.put(QUARANTINED)
            tx.machine_health.put_many(MACHINE_HEALTH)
        return _runs(storage, repo_url)
    finally:
        engine.dispose()


def _runs(storage: Storage, repo_url: str) -> Seeded:
    runs = Runs(storage, task_gate=threading.Semaphore(5), books=CatalogueDefault())
    root, alice = runs_user(storage, "root"), runs_user(storage, "alice")
    sprt = {"elo0": 0, "elo1": 2}
    green = submit(runs, alice, repo_url, tc="60+0.6", sprt=sprt, info="Tune king safety")
    yellow = submit(runs, alice, repo_url, sprt=sprt, info="Simplify pawn storms")
    plain = submit(runs, alice, repo_url, num_games=200, info="Plain fixed games")
    for run_id in (green, yellow, plain):
        runs.lifecycle.approve(root, run_id)
        runs.lifecycle.stop(root, run_id)
    with storage.write() as tx:
        decided = (
            (green, "accepted", {"is_green": True}),
            (yellow, "rejected", {"is_yellow": True}),
        )
        for run_id, state, flags in decided:
            stored = tx.runs.get(run_id)
            assert stored is not None
            spec = evolve(stored.args, sprt={**stored.args.sprt, "state": state})
            tx.runs.save(evolve(stored, args=spec, wins=60, losses=40, draws=100, **flags))
        stored = tx.runs.get(plain)
        assert stored is not None
        for number in range(1, PLAIN_FINISHED):
            copy_id = f"{int(plain, 16) + number:024x}"
            tx.runs.add(evolve(stored, id=copy_id, last_updated=stored.last_updated - number))
        colours = _coloured_results(tx, plain, green)
    waiting = runs.lifecycle.submit(
        alice,
        {"tests_repo": repo_url, "base_tag": "master", "new_tag": "patch", "tc": "10+0.1"},
        rescheduled_from=green,
    )
    runs.lifecycle.approve(root, waiting)
    spsa = {"raw_params": SPSA_PARAMS, "A": 0.1, "alpha": 0.602, "gamma": 0.101}
    spsa_run = submit(runs, alice, repo_url, num_games=10000, spsa=spsa, info="Tune two values")
    runs.lifecycle.approve(root, spsa_run)
    _spsa_progress(storage, spsa_run)
    busy = submit(runs, alice, repo_url, num_games=2000, priority=1, info="Busy run")
    runs.lifecycle.approve(root, busy)
    _code_with_a_diff(storage, busy)
    alice_pending = submit(runs, alice, repo_url, info="Waiting for approval")
    _to_review(storage, alice_pending)
    root_pending = submit(runs, root, repo_url, info="Root's own test")
    return Seeded(green, yellow, waiting, spsa_run, busy, alice_pending, root_pending, colours)


def _coloured_results(tx: Tx, plain: str, green: str) -> dict[str, str]:
    """Three more finished runs, newest of all, each coloured by another of the
    reference's rules: an accepted non-regression SPRT (blue), fixed games won
    clearly (LOS over 95%: green), and an SPRT stopped before its first game
    (no verdict: uncoloured). The plain run itself, fixed games with no
    result, is uncoloured too."""
    template, accepted = tx.runs.get(plain), tx.runs.get(green)
    assert template is not None
    assert accepted is not None
    sprt = accepted.args.sprt
    newest = template.last_updated + 10
    rows = {
        "blue": (
            evolve(accepted.args, info="Simplify away", sprt={**sprt, "elo0": -1.75, "elo1": 0.25}),
            {"wins": 60, "losses": 40, "draws": 100},
        ),
        "green": (
            template.args,
            {"wins": 60, "losses": 10, "draws": 30, "pentanomial": (0, 2, 10, 20, 18)},
        ),
        "": (
            evolve(accepted.args, info="Stopped at once", sprt={**sprt, "state": ""}),
            {"wins": 0, "losses": 0, "draws": 0},
        ),
    }
    colours = {plain: ""}
    for number, (colour, (spec, results)) in enumerate(rows.items(), start=1):
        run_id = f"{int(plain, 16) + 1000 + number:024x}"
        tx.runs.add(evolve(template, id=run_id, args=spec, last_updated=newest + number, **results))
        colours[run_id] = colour
    return colours


PENDING_WARNING = "The base commit is not an ancestor of the new commit."


def _to_review(storage: Storage, run_id: str) -> None:
    """What an approver must see before approving: an ancestry warning, nets,
    and the same bench signature on both sides."""
    with storage.write() as tx:
        run = tx.runs.get(run_id)
        assert run is not None
        nets = {"base_nets": ["nn-0000000000a1.nnue"], "new_nets": ["nn-0000000000b2.nnue"]}
        same = {"base_signature": "1234567", "new_signature": "1234567"}
        tx.runs.save(evolve(run, args=evolve(run.args, **nets, **same)))
        document = tx.kv.get(f"code/{run_id}") or {}
        tx.kv.set(f"code/{run_id}", {**document, "warnings": [PENDING_WARNING]})


def _code_with_a_diff(storage: Storage, run_id: str) -> None:
    """The run's code as submission keeps it (domain/runs/code_view.py), with a
    diff: the sample repository's commits differ in nothing."""
    document = {
        "commits": [{"sha": "2" * 40, "subject": "Widen the margin"}],
        "warnings": [],
        "diff": BUSY_DIFF,
        "diff_truncated": False,
        "diff_command": BUSY_DIFF_COMMAND,
    }
    with storage.write() as tx:
        tx.kv.set(f"code/{run_id}", document)


def _spsa_progress(storage: Storage, run_id: str) -> None:
    """Iteration 100 of 5,000 with two chart samples, as if workers had played."""
    with storage.write() as tx:
        run = tx.runs.get(run_id)
        assert run is not None
        spsa = dict(run.args.spsa)
        spsa["iter"] = 100
        spsa["params"] = [{**p, "theta": p["theta"] + 2.5} for p in spsa["params"]]
        spsa["param_history"] = [
            [{"theta": p["start"] + step, "R": 0.002, "c": 10.0} for p in spsa["params"]]
            for step in (1.0, 2.0)
        ]
        tx.runs.save(evolve(run, args=evolve(run.args, spsa=spsa)))


class CatalogueDefault(AnyBook):
    def default_book(self) -> str:
        return REFERENCE_DEFAULT_BOOK


def runs_user(storage: Storage, name: str) -> User:
    with storage.read() as tx:
        record = tx.users.get_by_key(name)
    assert record is not None
    return User.from_record(record)
