"""A short restart herd on a real server (bench/restart_herd.py): password
workers that reconnect after a restart are all served, none told anything
final, and none needs argon2 again."""

from bench.restart_herd import herd, parse_args
from tests import fresh_loop


def test_a_restart_under_password_workers_serves_them_all(database_url: str) -> None:
    args = parse_args(["--workers", "40", "--accounts", "4", "--window", "1", "--proofs-only"])
    args.database_url = database_url
    lines, failed = fresh_loop.run(herd(args))
    assert failed == []
    (row,) = [line for line in lines if line.startswith("| with worker proofs")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "40 of 40"
    assert cells[4] == "0"  # final refusals
    assert cells[5] == "0"  # temporary refusals: no argon2 gate met after the restart
