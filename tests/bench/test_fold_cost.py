"""bench/fold_cost.py as a correctness check (not a timing one): one short round
of both batch shapes, for this checkout and for its HEAD checked out into a
worktree; each child served its batches from the tree it was given."""

import pytest

from bench import fold_cost


@pytest.mark.slow
def test_one_round_measures_both_shapes_for_this_checkout_and_a_revision() -> None:
    options = fold_cost.parse(["--against", "HEAD", "--rounds", "1", "--batch", "6"])
    options.runs = 3
    lines = fold_cost.run(options)
    rows = [line.split(" | ") for line in lines if line.startswith("| ") and "---" not in line]
    assert [(row[0], row[1], row[2]) for row in rows[1:]] == [
        ("| one run", "1", "this checkout"),
        ("| one run", "1", "HEAD"),
        ("| 3 runs", "3", "this checkout"),
        ("| 3 runs", "3", "HEAD"),
    ]
    for row in rows[1:]:
        assert 0 < float(row[3]) < 100_000, row
