"""bench/health.py in small: the simulation runs and the rule convicts the bad
machines of a small fleet and none of its honest ones."""

from bench import health


def test_a_small_fleet(capsys: object) -> None:
    status = health.main(["--machines", "300", "--per-run", "200", "--repetitions", "2"])
    assert status == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "| all | " in out
    assert "Honest machines quarantined: 0 beside the bad ones, 0 in 2 fleets" in out
