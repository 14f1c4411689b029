"""Short floods (bench/flood.py) on a real server: the worst event-log queries
beside honest traffic, one address holding idle connections. Their report
comes out and nothing breaks; the 2x goals are the benchmark's to judge, on a
quiet machine, not a test's."""

import argparse

import uvloop

from bench.flood import idle, queries


def test_a_short_query_flood_is_answered_and_reported() -> None:
    args = argparse.Namespace(
        clients=10, seconds=1.5, rounds=1, actions=2_000, database_url="", queries="or,regex"
    )
    lines, failed = uvloop.run(queries(args))
    assert "| worker request_version |" in "\n".join(lines)
    assert not [line for line in failed if line.startswith("server error")]
    answered = next(line for line in lines if line.startswith("- The flood's answers"))
    assert "503" in answered or "400" in answered  # the flood met the gate or the deadline


def test_one_address_holding_idle_connections_leaves_room_for_another() -> None:
    args = argparse.Namespace(held=150, cap=120, database_url="")
    lines, failed = uvloop.run(idle(args))
    assert failed == [], lines
    assert "70 answered 200" in "\n".join(lines)
