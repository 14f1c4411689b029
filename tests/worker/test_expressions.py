"""Configuration expressions: evaluated from a whitelist, never with eval."""

import pytest

from arbiter.worker.errors import ConfigError
from arbiter.worker.expressions import evaluate


@pytest.mark.parametrize(
    ("text", "cores", "value"),
    [
        ("max(1,min(3,MAX-1))", 8, 3),
        ("max(1,min(3,MAX-1))", 2, 1),
        ("max(1,min(3,MAX-1))", 1, 1),
        ("MAX/2", 16, 8),
        ("MAX//3 + 1", 8, 3),
        ("-MAX + 10", 4, 6),
        ("2.5 * 2", 1, 5),
    ],
)
def test_values(text: str, cores: int, value: float) -> None:
    assert evaluate(text, {"MAX": cores}, "concurrency") == value


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "MAX ** 2",
        "open('x')",
        "min()",
        "FOO",
        "1/0",
        "True",
        "'3'",
        "max(key=1)",
        "x" * 101,
        "1 +",
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        evaluate(text, {"MAX": 4}, "concurrency")
