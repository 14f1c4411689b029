"""The worker end to end: a real server, real worker processes, the sample
engine repository (Debian's Stockfish behind a node cap, built by make).

The runs use `N=320000`: the server sizes tasks and SPRT batches for that
many nodes per move, while the sample engine searches 300 (master) or 1500
(stronger) nodes whatever it is asked, so a game takes a fraction of a second.
"""

import signal
from pathlib import Path

from arbiter.worker.sample_engine import SampleRepo
from tests.worker.e2e import (
    Accounts,
    actions,
    arena,
    games,
    get_run,
    get_task,
    run_pgn_games,
    tasks,
    wait_for,
)

TC = "N=320000"
POINTS = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}  # (white, black)


def test_an_sprt_with_wide_bounds_reaches_a_decision(
    accounts: Accounts, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        run_id = place.submit(sample_repo.url, tc=TC, sprt={"elo0": 0, "elo1": 50})
        worker = place.worker("sprt", "--fleet")
        assert worker.wait(150) == 0, worker.log()
        run = get_run(place.server, run_id)
        assert run["finished"], worker.log()
        assert run["args"]["sprt"]["state"] == "accepted"
        results = run["results"]
        assert results["wins"] > 5 * results["losses"]
        assert results["crashes"] == results["time_losses"] == 0
        played = sum(games(task["stats"]) for task in tasks(place.server, run_id))
        assert played == games(results)
        assert "bench:" in worker.log()
        assert "the server has no task for this worker: exiting" in worker.log()


def test_fixed_games_are_all_accounted_for_and_the_pgn_holds_them(
    accounts: Accounts, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        server = place.server
        run_id = place.submit(sample_repo.url, tc=TC, num_games=40)
        worker = place.worker("fixed", "--fleet")
        assert worker.wait(150) == 0, worker.log()
        run = get_run(server, run_id)
        assert run["finished"]
        results = run["results"]
        assert games(results) == 40
        task_list = tasks(server, run_id)
        assert len(task_list) >= 2  # a task is at most ~30 minutes of nominal work
        assert sum(games(task["stats"]) for task in task_list) == 40
        for task in task_list:
            assert sum(task["stats"]["pentanomial"]) * 2 == games(task["stats"])
        pgn = run_pgn_games(server, run_id)
        assert len(pgn) == 40
        new_name = f"New-{run['args']['resolved_new'][:8]}"
        new_points = sum(
            POINTS[game.headers["Result"]][0 if game.headers["White"] == new_name else 1]
            for game in pgn
        )
        assert new_points == results["wins"] + results["draws"] / 2
        assert sorted(int(game.headers["Round"]) for game in pgn) == list(range(1, 41))
        assert all(game.end().board().is_valid() for game in pgn)


def test_stopped_and_killed_workers_give_their_games_back(
    accounts: Accounts, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path, lease=15.0) as place:
        server = place.server
        run_id = place.submit(sample_repo.url, tc=TC, num_games=60)

        def reported(task_id: int) -> bool:
            task = get_task(server, run_id, task_id)
            return task is not None and games(task["stats"]) > 0

        # SIGTERM: the worker reports what it has, closes its task, exits.
        polite = place.worker("polite")
        wait_for(lambda: reported(0), 60, "a first report")
        polite.signal(signal.SIGTERM)
        assert polite.wait(30) == 0, polite.log()
        first = get_task(server, run_id, 0)
        assert first is not None
        assert not first["active"]
        messages = [a["message"] for a in actions(server, run_id, "failed_task")]
        assert any("SIGTERM" in message for message in messages), messages

        # SIGKILL: the task goes silent; the server reclaims it after its lease.
        killed = place.worker("killed")
        wait_for(lambda: reported(1), 60, "a first report")
        killed.signal(signal.SIGKILL)
        killed.wait(10)
        wait_for(lambda: actions(server, run_id, "dead_task"), 40, "the dead task reclaimed")
        second = get_task(server, run_id, 1)
        assert second is not None
        assert not second["active"]

        # The games those two tasks did not play are offered again, and played.
        last = place.worker("last", "--fleet")
        assert last.wait(150) == 0, last.log()
        run = get_run(server, run_id)
        assert run["finished"]
        assert games(run["results"]) == 60
        task_list = tasks(server, run_id)
        assert len(task_list) >= 3
        assert sum(games(task["stats"]) for task in task_list) == 60


def test_a_build_failure_reaches_the_server_with_the_build_log(
    accounts: Accounts, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        server = place.server
        run_id = place.submit(sample_repo.url, tc=TC, num_games=20, new_tag="broken")
        worker = place.worker("builder", "--fleet")
        assert worker.wait(60) == 0, worker.log()
        failures = actions(server, run_id, "failed_task")
        assert len(failures) == 1
        assert "deliberate build failure" in failures[0]["message"]
        assert "build of" in failures[0]["message"]
        first = get_task(server, run_id, 0)
        assert first is not None
        assert not first["active"]


def test_an_spsa_run_moves_its_parameters(
    accounts: Accounts, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        server = place.server
        spsa = {"raw_params": "Skill Level,10,0,20,4,0.05"}
        run_id = place.submit(sample_repo.url, tc=TC, num_games=1000, spsa=spsa, new_tag="master")
        worker = place.worker("tuner")
        wait_for(lambda: get_task(server, run_id, 0), 60, "a task")
        (tmp_path / "tuner" / "stop").touch()  # finish this task, then exit
        assert worker.wait(120) == 0, worker.log()
        task = get_task(server, run_id, 0)
        assert task is not None
        played = games(task["stats"])
        assert played > 0
        state = get_run(server, run_id)["args"]["spsa"]
        assert state["iter"] == played // 2
        (param,) = state["params"]
        assert param["theta"] != 10.0
        assert 0.0 <= param["theta"] <= 20.0
        assert not (tmp_path / "tuner" / "stop").exists()
