"""Machine facts: compiler versions and the CPU's Stockfish ARCH."""

import pytest

from arbiter.worker.host import find_compiler, parse_version, this_machine, uname, x86_arch


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("g++ (Debian 12.2.0-14) 12.2.0", (12, 2, 0)),
        ("Debian clang version 14.0.6", (14, 0, 6)),
        ("g++ (GCC) 9.3", (9, 3, 0)),
        ("no numbers here", None),
    ],
)
def test_parse_version(line: str, version: tuple[int, int, int] | None) -> None:
    assert parse_version(line) == version


@pytest.mark.parametrize(
    ("flags", "arch"),
    [
        ({"avx512f", "avx512bw", "avx512_vnni", "avx2", "bmi2"}, "x86-64-vnni512"),
        ({"avx2", "bmi2", "popcnt", "sse4_1"}, "x86-64-bmi2"),
        ({"avx2", "popcnt", "sse4_1"}, "x86-64-avx2"),
        ({"sse4_1", "popcnt", "ssse3"}, "x86-64-sse41-popcnt"),
        ({"sse2"}, "x86-64"),
    ],
)
def test_x86_arch(flags: set[str], arch: str) -> None:
    assert x86_arch(frozenset(flags)) == arch


def test_this_machine() -> None:
    machine = this_machine()
    assert machine.cpus >= 1
    assert machine.memory_mib > 0
    assert machine.machine_id
    assert uname()


def test_the_installed_gxx_is_found() -> None:
    compiler = find_compiler()
    assert compiler is not None  # scripts/install-system-deps installs g++
    assert compiler.name == "g++"
    assert compiler.comp == "gcc"
    assert compiler.version >= (9, 3, 0)
    assert find_compiler("no-such-compiler++") is None
