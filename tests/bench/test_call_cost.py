"""bench/call_cost.py as a correctness check (not a timing one): one short round
against the floor, this checkout and this checkout's HEAD checked out into a
worktree; every server answered and was measured."""

import pytest

from bench import call_cost


@pytest.mark.slow
def test_one_round_measures_the_floor_this_checkout_and_a_revision() -> None:
    options = call_cost.parse(["--against", "HEAD", "--rounds", "1", "--seconds", "1"])
    options.connections = 10
    lines = call_cost.run(options)
    rows = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| floor (raw ASGI app)",
        "| arbiter (this checkout)",
        "| arbiter (HEAD)",
    ]
    for row in rows:
        cost = float(row.split(" | ")[1])
        assert 0 < cost < 100_000, row
