"""A benchmark records the command that ran, with its database URL hidden."""

from bench.lib.command import ROOT, command_line


def test_the_recorded_command_is_the_one_that_ran() -> None:
    argv = [str(ROOT / "bench" / "bench_pages.py"), "--requests", "50", "--write"]
    assert command_line(argv, {}) == "python bench/bench_pages.py --requests 50 --write"


def test_database_urls_are_hidden_wherever_they_are_given() -> None:
    url = "postgresql://alice:secret@127.0.0.1/db"
    argv = ["bench/fleet.py", "--database-url", url, "--workers", "10", f"--database-url={url}"]
    recorded = command_line(argv, {"ARBITER_TEST_POSTGRES_URL": url})
    assert "secret" not in recorded
    assert recorded == (
        "ARBITER_TEST_POSTGRES_URL=<database URL> python bench/fleet.py"
        " --database-url '<database URL>' --workers 10 '--database-url=<database URL>'"
    )
