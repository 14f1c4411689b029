"""A Fishtest run document as a run record: its args read into a checked spec."""

import pytest

from arbiter.importer.runs import Skip, convert_run
from tests.importer.fishtest_dump import base_args, run, stats, task


def test_keys_arbiter_does_not_know_are_kept() -> None:
    args = {**base_args(), "master_repo": "https://github.com/official-stockfish/Stockfish"}
    imported = convert_run(run(1, args, [task(0, stats(10, 10, 20, [0, 5, 10, 5, 0]))]))
    assert imported.run.args.extra == {"master_repo": args["master_repo"]}
    assert imported.run.args.tc == "10+0.1"


def test_a_number_written_as_text_is_read_as_one() -> None:
    imported = convert_run(run(2, base_args(threads="2"), []))
    assert imported.run.args.threads == 2


def test_args_of_a_wrong_type_skip_the_run_and_name_the_field() -> None:
    with pytest.raises(Skip, match=r"args: .*\$\.threads"):
        convert_run(run(3, base_args(threads="many"), []))
