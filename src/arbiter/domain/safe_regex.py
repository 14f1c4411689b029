"""Regular expressions from strangers, compiled only when matching them cannot
run away.

Python's `re` backtracks, and a match cannot be interrupted once it runs: two
unbounded repeats in a row (`.*.*x`) take about half a minute on one
5,000-character message. So the pattern language is cut down until the worst
case is known: no backreferences, no lookaround, no repeated group, at most one
unbounded repeat (`*`, `+`, `{m,}`), and the choices the other repeats and
alternations add multiply to at most `MAX_CHOICES`. The worst case is then
about `MAX_CHOICES` times a quadratic scan of the text (`.*x` on a
5,120-character message: about 16 ms).
"""

import re
import warnings
from dataclasses import dataclass, field

MAX_PATTERN = 128
MAX_CHOICES = 16
FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
# `{m}`, `{m,}`, `{m,n}`, `{,n}`; any other brace is a literal to `re`.
_BOUNDS = re.compile(r"\{(?:(\d+)(,?)(\d*)|,(\d+))\}")


class UnsafePattern(ValueError):  # noqa: N818 - reads as what happened
    """The pattern is refused; the message says why."""


@dataclass
class _Shape:
    unbounded: int = 0
    choices: int = 1
    alternatives: list[int] = field(default_factory=lambda: [1])  # per open group

    def repeat(self, low: int, high: int | None) -> None:
        if high is None:
            self.unbounded += 1
        else:
            self.choices *= max(1, high - low + 1)


def compile_pattern(pattern: str, options: str = "") -> re.Pattern[str]:
    """The compiled pattern, or UnsafePattern naming what is refused."""
    if len(pattern) > MAX_PATTERN:
        raise UnsafePattern(f"longer than {MAX_PATTERN} characters")
    flags = 0
    for letter in options:
        if letter not in FLAGS:
            raise UnsafePattern(f"option {letter!r} is not supported (only i, m, s)")
        flags |= FLAGS[letter]
    shape = _shape(pattern)
    if shape.unbounded > 1:
        raise UnsafePattern("at most one unbounded repeat (*, +, {m,}) is allowed")
    if shape.choices > MAX_CHOICES:
        raise UnsafePattern(f"its repeats and alternatives allow more than {MAX_CHOICES} ways")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "possible nested set" and the like: refused
        try:
            return re.compile(pattern, flags)
        except (re.error, Warning) as error:
            raise UnsafePattern(str(error)) from None


def _shape(pattern: str) -> _Shape:
    shape = _Shape()
    index, previous = 0, ""  # previous: "atom", "group", "repeat" or "" (nothing)
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            if pattern[index + 1 : index + 2].isdigit() and pattern[index + 1] != "0":
                raise UnsafePattern("backreferences are not supported")
            index, previous = index + 2, "atom"
        elif char == "[":
            index, previous = _class_end(pattern, index), "atom"
        elif char == "(":
            index, previous = _open_group(pattern, index, shape), ""
        elif char == ")":
            shape.choices *= shape.alternatives.pop() if len(shape.alternatives) > 1 else 1
            index, previous = index + 1, "group"
        elif char == "|":
            shape.alternatives[-1] += 1
            index, previous = index + 1, ""
        elif char in "*+?" or _BOUNDS.match(pattern, index):
            index = _repeat(pattern, index, previous, shape)
            previous = "repeat"
        else:
            index, previous = index + 1, "atom"
    shape.choices *= shape.alternatives[0]
    return shape


def _class_end(pattern: str, start: int) -> int:
    """Index just past the character class opening at `start`."""
    index = start + 1
    if pattern[index : index + 1] == "^":
        index += 1
    if pattern[index : index + 1] == "]":  # a leading ] is a literal
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1


def _open_group(pattern: str, index: int, shape: _Shape) -> int:
    if pattern.startswith("(?", index):
        if not pattern.startswith("(?:", index):
            raise UnsafePattern("only plain and (?: groups are supported")
        index += 2
    shape.alternatives.append(1)
    return index + 1


def _repeat(pattern: str, index: int, previous: str, shape: _Shape) -> int:
    if previous == "group":
        raise UnsafePattern("a group cannot be repeated")
    if previous == "repeat":
        # `a*?` (lazy) or `a*+` (possessive) is one repeat; `a**` is re's error.
        return index + 1
    char = pattern[index]
    if char == "*":
        shape.repeat(0, None)
        return index + 1
    if char == "+":
        shape.repeat(1, None)
        return index + 1
    if char == "?":
        shape.repeat(0, 1)
        return index + 1
    bounds = _BOUNDS.match(pattern, index)
    assert bounds is not None
    low_text, comma, high_text, only_high = bounds.groups()
    if only_high is not None:
        shape.repeat(0, int(only_high))
    else:
        low = int(low_text)
        shape.repeat(low, int(high_text) if high_text else (None if comma else low))
    return bounds.end()
