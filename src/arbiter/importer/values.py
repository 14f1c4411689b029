"""BSON values made plain: what Arbiter's JSON columns and records can hold."""

import math
import re
from datetime import datetime
from typing import Any

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

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
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, bool | str | int) or value is None:
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


def integer(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return default


def number(value: Any, default: float = 0.0) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


def text(value: Any, limit: int, default: str = "") -> str:
    """A string clipped to its column's size (PostgreSQL refuses longer ones)."""
    return value[:limit] if isinstance(value, str) else default
