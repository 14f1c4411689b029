"""Patterns from strangers: what is compiled, what is refused and why."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arbiter.domain.safe_regex import MAX_CHOICES, MAX_PATTERN, UnsafePattern, compile_pattern


@pytest.mark.parametrize(
    "pattern",
    [
        "^master",
        r"\d+\.\d",
        ".*Elo",
        "a{2,5}b",
        "a{,3}",
        "a{}",  # a literal brace, not a repeat
        "(ab|cd)e",
        "(?:bob|carol)-[0-9a-f]{4}$",
        "[]a]*",
        "a*?b",
        r"\(x\)*",  # an escaped parenthesis is a character
        "x" * MAX_PATTERN,
    ],
)
def test_plain_patterns_are_compiled(pattern: str) -> None:
    assert compile_pattern(pattern).pattern == pattern


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("a*a*x", "at most one unbounded repeat"),
        (".*.*x", "at most one unbounded repeat"),
        (r"\w+\s+\w+", "at most one unbounded repeat"),
        ("a{3,}b+", "at most one unbounded repeat"),
        ("(a|b)*", "a group cannot be repeated"),
        ("(a+)+$", "a group cannot be repeated"),
        ("(?:ab){2}", "a group cannot be repeated"),
        (r"(a)\1", "backreferences"),
        ("(?=a)b", "only plain and (?: groups"),
        ("(?P<name>a)", "only plain and (?: groups"),
        ("(?i)a", "only plain and (?: groups"),
        ("a{0,100}", f"more than {MAX_CHOICES} ways"),
        ("a?" * 5, f"more than {MAX_CHOICES} ways"),
        ("(a|b|c)(d|e|f)(g|h)", f"more than {MAX_CHOICES} ways"),
        ("x" * (MAX_PATTERN + 1), f"longer than {MAX_PATTERN}"),
        ("[[a]", "nested set"),
        ("(", "missing )"),
    ],
)
def test_runaway_or_broken_patterns_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(UnsafePattern, match=re.escape(why)):
        compile_pattern(pattern)


def test_options_are_the_three_flags() -> None:
    assert compile_pattern("a", "ims").flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL)
    with pytest.raises(UnsafePattern, match="option 'x'"):
        compile_pattern("a", "x")


@given(st.text(alphabet="ab()|*+?{},.[]^$\\:1?=P<>-", max_size=24))
def test_any_text_is_compiled_or_refused_nothing_else(pattern: str) -> None:
    """The scanner never trips over odd text: a pattern is `re`'s own, or refused."""
    try:
        compiled = compile_pattern(pattern)
    except UnsafePattern:
        return
    assert compiled == re.compile(pattern)
