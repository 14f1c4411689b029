"""Where an engine keeps its nets and bench: Stockfish's places, or its own file.

An engine that is not shaped like Stockfish declares them in `arbiter-engine.toml`
at its repository's root (docs/engine-layout.md):

    [nets]
    file = "src/network.h"
    names = ["DefaultNet"]     # lines naming these hold the net's file name in quotes

    [bench]
    prefix = "Bench:"          # a commit message line "Bench: 1234567" is the signature

No regular expressions: the server reads these from any repository, so the
format admits nothing that could run away. Every key is optional; a missing
[nets] means the engine uses no nets, a missing [bench] the usual prefix.
"""

import re
import tomllib
from dataclasses import dataclass

from arbiter.domain.errors import ValidationError

LAYOUT_FILE = "arbiter-engine.toml"
MAX_LAYOUT_BYTES = 16 * 1024
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_PATH = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,15}")
_QUOTED = re.compile(r'"([^"\\\n]{1,128})"')
_BENCH = re.compile(r"[ \t]*(\d{1,20})\b")


@dataclass(frozen=True, slots=True)
class EngineLayout:
    nets_file: str = ""  # "" : no nets
    net_names: tuple[str, ...] = ()
    bench_prefix: str = "Bench:"
    declared: bool = False  # read from the engine's own file


STOCKFISH = EngineLayout(
    nets_file="src/evaluate.h",
    net_names=("EvalFileDefaultNameBig", "EvalFileDefaultNameSmall"),
)


def parse_layout(text: str, side: str = "new") -> EngineLayout:
    """The layout an `arbiter-engine.toml` declares; ValidationError (on the side's
    tag field) saying what is wrong."""
    try:
        return _parse(text)
    except _LayoutError as bad:
        raise ValidationError(f"{side}_tag", f"{LAYOUT_FILE} of the {side} commit: {bad}") from None


def _parse(text: str) -> EngineLayout:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise _bad(f"is not valid TOML ({error})") from None
    nets = _table(data, "nets")
    bench = _table(data, "bench")
    nets_file = _string(nets, "file", "nets.file")
    if nets_file and (_PATH.fullmatch(nets_file) is None or ".." in nets_file.split("/")):
        raise _bad("nets.file must be a relative path inside the repository")
    names = nets.get("names", [])
    if not isinstance(names, list) or not all(
        isinstance(name, str) and _NAME.fullmatch(name) for name in names
    ):
        raise _bad("nets.names must be a list of identifiers")
    prefix = _string(bench, "prefix", "bench.prefix") or "Bench:"
    if len(prefix) > 32 or "\n" in prefix:
        raise _bad("bench.prefix must be one short line")
    return EngineLayout(nets_file, tuple(names[:8]), prefix, declared=True)


def net_names(layout: EngineLayout, source: str) -> list[str]:
    """The quoted names on the lines that mention one of the layout's markers, in order."""
    found: list[str] = []
    for line in source.splitlines():
        if any(marker in line for marker in layout.net_names):
            match = _QUOTED.search(line)
            if match is not None and match.group(1) not in found:
                found.append(match.group(1))
    return found


def bench_of(layout: EngineLayout, message: str) -> str | None:
    """The signature a commit message gives (`Bench: N`, the last such line), or None."""
    bench = None
    prefix = layout.bench_prefix.lower()
    for line in message.splitlines():
        stripped = line.strip()
        if stripped.lower().startswith(prefix):
            match = _BENCH.match(stripped[len(prefix) :])
            if match is not None:
                bench = match.group(1)
    return bench


def _table(data: dict[str, object], name: str) -> dict[str, object]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise _bad(f"[{name}] must be a table")
    return table


def _string(table: dict[str, object], key: str, label: str) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        raise _bad(f"{label} must be a string")
    return value


class _LayoutError(ValueError):
    """What is wrong with the file, before it is told which side it came from."""


def _bad(message: str) -> _LayoutError:
    return _LayoutError(message)
