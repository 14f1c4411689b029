"""Arithmetic expressions of the configuration, such as `max(1,min(3,MAX-1))`.

Evaluated from the syntax tree with a whitelist (numbers, one named value,
+ - * / //, unary minus, min and max), never with `eval`: a configuration file
can be edited by anyone who can write to the worker's directory.
"""

import ast
import operator
from collections.abc import Callable, Mapping

from arbiter.worker.errors import ConfigError

MAX_EXPRESSION_CHARS = 100

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max}


def evaluate(text: str, names: Mapping[str, float], what: str) -> float:
    """The value of `text`; ConfigError naming `what` when it is not a plain expression."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ConfigError(f"{what}: longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _value(tree.body, names)
    except (SyntaxError, ValueError, ZeroDivisionError, TypeError) as error:
        allowed = ", ".join(sorted(names))
        raise ConfigError(
            f"{what}: {text!r} is not an expression of numbers, {allowed}, "
            f"+ - * / //, min() and max() ({error})"
        ) from None


def _value(node: ast.expr, names: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"unexpected constant {node.value!r}")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ValueError(f"unknown name {node.id}")
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _value(node.operand, names)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left, names), _value(node.right, names))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and node.args
        and not node.keywords
    ):
        return float(_FUNCTIONS[node.func.id](*(_value(arg, names) for arg in node.args)))
    raise ValueError(f"unsupported {type(node).__name__}")
