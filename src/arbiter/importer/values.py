"""BSON values made plain: what Arbiter's JSON columns and records can hold.

Every number type BSON has comes out as a Python int or float: a 32-bit int,
an Int64 (an int subclass no JSON encoder of ours accepts as it is), a double,
and a Decimal128. Text loses its NUL characters, which PostgreSQL's text and
JSONB refuse and which would cut a name short in C-string APIs.
"""

import math
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from bson import ObjectId
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128

_HEX24 = re.compile(r"[0-9a-f]{24}")


def timestamp(value: Any) -> float | None:
    """Unix seconds of a BSON date (or of a number already in seconds); None otherwise."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, DatetimeMS):
        return int(value) / 1000.0
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def object_id_text(value: Any) -> str | None:
    """24 lower-case hex digits of an ObjectId (or of a string that is one), else None."""
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, str) and _HEX24.fullmatch(value.lower()):
        return value.lower()
    return None


def id_time(document: dict[str, Any]) -> float | None:
    """When MongoDB created the document: the seconds its ObjectId begins with."""
    value = document.get("_id")
    return float(value.generation_time.timestamp()) if isinstance(value, ObjectId) else None


def plain(value: Any) -> Any:  # noqa: PLR0911 - one return per BSON type
    """JSON-safe: dates as Unix seconds, ObjectIds as hex text, bytes as hex,
    non-finite floats as text (PostgreSQL's JSONB has no NaN)."""
    if isinstance(value, dict):
        return {_clean(str(key)): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, int | Decimal128):
        value = _python_number(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime | DatetimeMS):
        return timestamp(value)
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)  # Decimal128, Regex, Code...: their text


def mapping(value: Any) -> dict[str, Any]:
    """A subdocument, or an empty one when the field is absent or of another type."""
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _python_number(value: int | Decimal128) -> int | float:
    """An Int64 as a plain int; a Decimal128 as an int when whole, else a float."""
    if isinstance(value, int):
        return int(value)
    decimal: Decimal = value.to_decimal()
    if decimal.is_finite() and decimal == decimal.to_integral_value():
        return int(decimal)
    return float(decimal)


def integer(value: Any, default: int = 0) -> int:
    if isinstance(value, Decimal128):
        value = _python_number(value)
    if isinstance(value, int):  # bool, Int64 and int alike
        return int(value)
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return default


def number(value: Any, default: float = 0.0) -> float:
    if isinstance(value, Decimal128):
        value = _python_number(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


def text(value: Any, limit: int, default: str = "") -> str:
    """A string without NULs, clipped to its column's size (PostgreSQL refuses
    longer ones)."""
    return _clean(value)[:limit] if isinstance(value, str) else default


def _clean(value: str) -> str:
    return value.replace("\x00", "") if "\x00" in value else value
