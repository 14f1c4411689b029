"""Reading one submitted value: text, a whole number, a number or a flag, with
`ValidationError(field, ...)` for a value that is none. Values come from forms
(strings) or JSON (typed); both are accepted, and a bool is never taken for a
number (True is an int in Python)."""

import math
import re
from collections.abc import Mapping

from arbiter.domain.errors import ValidationError

_INT_TEXT = re.compile(r"\s*[+-]?\d{1,12}\s*", re.ASCII)


def read_text(
    raw: Mapping[str, object],
    key: str,
    *,
    default: str = "",
    required: bool = False,
    name: str | None = None,
    keep_lines: bool = False,
) -> str:
    field = name or key
    value = raw.get(key)
    if value is None or value == "":
        if required:
            raise ValidationError(field, "is required")
        return default
    if not isinstance(value, str):
        raise ValidationError(field, "must be text")
    allowed = "\t\n\r" if keep_lines else ""
    if not keep_lines:
        value = value.strip()  # a pasted value often brings a newline along
    # NUL and friends: PostgreSQL refuses NUL in text, and nobody means them.
    if any(ord(c) < 32 and c not in allowed for c in value) or "\x7f" in value:
        raise ValidationError(field, "must not contain control characters")
    return value


def read_int(
    raw: Mapping[str, object],
    key: str,
    default: int,
    *,
    low: int,
    high: int,
    name: str | None = None,
) -> int:
    field = name or key
    value = raw.get(key)
    if value is None or value == "":
        number = default
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT_TEXT.fullmatch(value):
        number = int(value)
    else:
        raise ValidationError(field, "must be a whole number")
    if not low <= number <= high:
        raise ValidationError(field, f"must be between {low:,} and {high:,}, got {number:,}")
    return number


def read_float(
    raw: Mapping[str, object],
    key: str,
    default: float | None,
    *,
    low: float | None = None,
    high: float | None = None,
    name: str | None = None,
) -> float:
    field = name or key
    value = raw.get(key)
    if value is None or value == "":
        if default is None:
            raise ValidationError(field, "is required")
        number = default
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ValidationError(field, "must be a number") from None
    else:
        raise ValidationError(field, "must be a number")
    if not math.isfinite(number):
        raise ValidationError(field, "must be a finite number")
    if low is not None and number < low:
        raise ValidationError(field, f"must be at least {low:g}, got {number:g}")
    if high is not None and number > high:
        raise ValidationError(field, f"must be at most {high:g}, got {number:g}")
    return number


_TRUE = frozenset({"true", "1", "on", "yes"})
_FALSE = frozenset({"false", "0", "off", "no"})


def read_bool(raw: Mapping[str, object], key: str, *, default: bool) -> bool:
    value = raw.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValidationError(key, "must be true or false")
