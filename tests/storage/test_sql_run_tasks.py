"""The run tasks' storage helpers beyond what tests/domain/runs/test_task_table.py
checks against memory on both backends."""

from arbiter.storage.sql_run_tasks import dense_ranks


def test_machines_are_ranked_densely_with_the_missing_value_in_its_place() -> None:
    ranks, missing = dense_ranks({"a": 2.5, "b": -3.0, "c": 2.5, "d": float("inf")}, -1.0)
    assert ranks == {"b": 0, "a": 2, "c": 2, "d": 3}
    assert missing == 1
