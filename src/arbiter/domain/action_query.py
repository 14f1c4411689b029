"""The MongoDB-style query Fishtest clients send to `/api/actions`, turned into
a search of the stored log (`storage.action_search`).

The query is read over the action documents as the API shows them
(`actions.to_wire`): `_id` is 24 hex digits, the time's whole seconds (8)
then the row id (16), so it orders as the log does; a field is absent when
`to_wire` leaves it out; `nn` is a value of the stored `data` document, and
`data` (rarely asked for) is compared with a document in Python, like a
`$regex`. A field no action has is absent everywhere. MongoDB's meaning is
kept: `$ne`/`$nin` match absent fields, comparisons match only values of
their operand's type (numbers or strings), `null` matches absent fields.
One deviation is deliberate: `_id` is compared as the string the API shows,
where MongoDB would hold an ObjectId that no JSON string equals (the
reference answers `{"_id": "<hex>"}` with nothing).

A `$regex` (and a document) is checked in Python on the rows the rest of the
query leaves, oldest first, for at most `SCAN_SECONDS`; a query that needs
longer is refused and should name an indexed field (time, action, username,
run_id, worker).

Refused with a message naming the culprit (a 400): an operator outside
`$eq $ne $in $nin $gt $gte $lt $lte $exists $regex $options $not` and the
top-level `$and $or $nor`; operands of the wrong kind; a regular expression that
`safe_regex` will not run; numbers beyond ±2^53, strings with NUL.

Two keys from Arbiter's first version of the endpoint stay, at the top level
only: `max_count` (how many, at most `MAX_ACTIONS`) and `before` (a time;
older actions only, newest first, the way the log is paged backwards).
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from arbiter.domain.errors import BadRequest
from arbiter.domain.safe_regex import UnsafePattern, compile_pattern
from arbiter.storage.action_search import (
    ALWAYS,
    NEVER,
    ActionSearch,
    AllOf,
    AnyOf,
    Check,
    Compare,
    Condition,
    Not,
    OneOf,
    Operator,
    Scalar,
    Value,
    column_value,
)
from arbiter.storage.records import ActionRecord

MAX_ACTIONS = 200  # the reference's `.limit(200)`
SCAN_SECONDS = 2.0
MAX_DEPTH = 16
MAX_VALUES = 1000
# Branches of one $and/$or/$nor: a long $or of equalities is one $in, and past
# a few hundred branches SQLite refuses the statement ("too many terms").
MAX_BRANCHES = 100
MAX_NUMBER = 2**53  # beyond it a JSON number is not exact in every client
MAX_INTEGER = 2**31 - 1  # ids and task ids are INTEGER columns (32 bits on PostgreSQL)
_HEX_ID = re.compile(r"[0-9a-f]{24}")
Kind = Literal["id", "number", "integer", "text", "document"]
IdText = Callable[[ActionRecord], str]
COMPARISONS: dict[str, Operator] = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
FIELD_OPERATORS = frozenset({"$eq", "$ne", "$in", "$nin", "$exists", "$regex", "$options", "$not"})
FIELD_OPERATORS |= frozenset(COMPARISONS)


@dataclass(frozen=True, slots=True)
class Field:
    column: str
    kind: Kind  # a field is absent from a document where its column is NULL


FIELDS: dict[str, Field] = {
    "_id": Field("id", "id"),
    "time": Field("time", "number"),
    "action": Field("action", "text"),
    "username": Field("username", "text"),
    "run_id": Field("run_id", "text"),
    "run": Field("run", "text"),
    "task_id": Field("task_id", "integer"),
    "worker": Field("worker", "text"),
    "user": Field("user", "text"),
    "message": Field("message", "text"),
    "nn": Field("data.nn", "text"),
    "data": Field("data", "document"),
}


def parse_search(body: object, id_text: IdText) -> ActionSearch:
    """The search a query body asks for; BadRequest naming what is wrong.

    `id_text` is `to_wire`'s `_id` of a row, which `$regex` on `_id` reads.
    """
    if not isinstance(body, dict):
        raise BadRequest("the query must be a JSON object")
    query = dict(body)
    limit = _max_count(query.pop("max_count", MAX_ACTIONS))
    before = query.pop("before", None)
    where = _Parser(id_text).query(query, 0)
    if before is None:
        return ActionSearch(where=where, limit=limit, scan_seconds=SCAN_SECONDS)
    if not _is_number(before):
        raise BadRequest("before: expected a Unix time in seconds")
    older = AllOf((Compare("time", "<", float(before)), where))
    return ActionSearch(where=older, limit=limit, newest_first=True, scan_seconds=SCAN_SECONDS)


def _max_count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest("max_count: expected an integer")
    return max(1, min(value, MAX_ACTIONS))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Parser:
    """One query's walk; counts the values so a body cannot become a huge IN list."""

    def __init__(self, id_text: IdText) -> None:
        self._values = 0
        self._id_text = id_text

    def query(self, query: object, depth: int) -> Condition:
        if not isinstance(query, dict):
            raise BadRequest("expected a query object")
        if depth > MAX_DEPTH:
            raise BadRequest(f"queries nest at most {MAX_DEPTH} deep")
        parts = [self._term(key, value, depth) for key, value in query.items()]
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def _term(self, key: str, value: object, depth: int) -> Condition:
        if key in ("$and", "$or", "$nor"):
            if not isinstance(value, list) or not value:
                raise BadRequest(f"{key}: expected a non-empty array of queries")
            if len(value) > MAX_BRANCHES:
                raise BadRequest(f"{key}: at most {MAX_BRANCHES} queries (use $in for values)")
            parts = tuple(self.query(part, depth + 1) for part in value)
            if key == "$and":
                return AllOf(parts)
            return AnyOf(parts) if key == "$or" else Not(AnyOf(parts))
        if key.startswith("$"):
            raise BadRequest(f"unknown operator: {key}")
        field = FIELDS.get(key)
        if isinstance(value, dict) and any(name.startswith("$") for name in value):
            return self._operators(key, field, value)
        return self._equal(key, field, value)

    def _operators(self, key: str, field: Field | None, operators: dict[str, Any]) -> Condition:
        unknown = sorted(set(operators) - FIELD_OPERATORS)
        if unknown:
            raise BadRequest(f"unknown operator: {unknown[0]}")
        if "$options" in operators and "$regex" not in operators:
            raise BadRequest(f"{key}: $options without $regex")
        parts: list[Condition] = []
        for name, operand in operators.items():
            if name == "$options":
                continue
            where = f"{key}.{name}"
            if name == "$regex":
                options = operators.get("$options", "")
                parts.append(self._regex(where, field, operand, options))
            elif name == "$not":
                parts.append(Not(self._negated(where, field, operand)))
            elif name in COMPARISONS:
                parts.append(self._compare(where, field, COMPARISONS[name], operand))
            else:
                parts.append(self._set_test(where, key, field, name, operand))
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def _negated(self, where: str, field: Field | None, operand: object) -> Condition:
        """`$not`'s operand: operators on the same field, as MongoDB has it (it
        takes no plain value); a field it cannot match is matched by `$not`."""
        if not (isinstance(operand, dict) and operand and all(k.startswith("$") for k in operand)):
            raise BadRequest(f"{where}: expected an object of operators")
        return self._operators(where.rsplit(".", 1)[0], field, operand)

    def _set_test(
        self, where: str, key: str, field: Field | None, name: str, operand: object
    ) -> Condition:
        if name == "$exists":
            if not (_is_number(operand) or isinstance(operand, bool)):
                raise BadRequest(f"{where}: expected true or false")
            return _absent(field, negated=bool(operand))
        if name in ("$eq", "$ne"):
            return self._equal(where, field, operand, negated=name == "$ne")
        if not isinstance(operand, list):
            raise BadRequest(f"{where}: expected an array")
        return self._one_of(where, field, operand, negated=name == "$nin")

    def _equal(
        self, where: str, field: Field | None, value: object, *, negated: bool = False
    ) -> Condition:
        return self._one_of(where, field, [value], negated=negated)

    def _one_of(
        self, where: str, field: Field | None, values: list[Any], *, negated: bool
    ) -> Condition:
        self._values += len(values)
        if self._values > MAX_VALUES:
            raise BadRequest(f"{where}: a query compares with at most {MAX_VALUES} values")
        stored: list[Value] = []
        for value in values:
            _check_value(where, value)
            if value is None:
                stored.append(None)
            elif field is not None and (found := _stored(field, value)) is not None:
                stored.append(found)
        if field is None:  # absent from every document: only null can match
            return ALWAYS if (None in stored) != negated else NEVER
        if field.kind == "document":
            return _document_one_of(
                [value for value in values if value is None or isinstance(value, dict)],
                negated=negated,
            )
        unique = tuple(dict.fromkeys(stored))
        if field.kind == "id":
            return _id_one_of(unique, negated=negated)
        return OneOf(field.column, unique, negated=negated)

    def _compare(
        self, where: str, field: Field | None, operator: Operator, operand: object
    ) -> Condition:
        _check_value(where, operand)
        if not (_is_number(operand) or isinstance(operand, str)):
            raise BadRequest(f"{where}: expected a number or a string")
        if field is None:
            return NEVER
        if field.kind == "id":
            if not (isinstance(operand, str) and _HEX_ID.fullmatch(operand)):
                raise BadRequest(f"{where}: expected an _id (24 lowercase hex digits)")
            return _id_compare(operator, operand)
        bound = _bound(field, operator, operand)  # type: ignore[arg-type]
        if bound is None:
            return NEVER
        operator, value = bound
        if isinstance(value, int) and abs(value) > MAX_INTEGER:
            return _beyond_integers(field, operator, value)
        return Compare(field.column, operator, value)

    def _regex(
        self, where: str, field: Field | None, pattern: object, options: object
    ) -> Condition:
        if not isinstance(pattern, str) or not isinstance(options, str):
            raise BadRequest(f"{where}: expected a pattern string (and $options letters)")
        try:
            compiled = compile_pattern(pattern, options)
        except UnsafePattern as error:
            raise BadRequest(f"{where}: {error}") from None
        if field is None or field.kind not in ("id", "text"):
            return NEVER
        if field.kind == "id":
            id_text = self._id_text
            return Check(lambda record: compiled.search(id_text(record)) is not None)
        column = field.column

        def passes(record: ActionRecord) -> bool:
            value = column_value(record, column)
            return isinstance(value, str) and compiled.search(value) is not None

        return Check(passes)


def _check_value(where: str, value: object) -> None:
    if _is_number(value) and abs(value) > MAX_NUMBER:  # type: ignore[arg-type]
        raise BadRequest(f"{where}: numbers must lie within ±2^53")
    if isinstance(value, str) and "\x00" in value:
        raise BadRequest(f"{where}: strings cannot hold NUL characters")


def _absent(field: Field | None, *, negated: bool) -> Condition:
    """The field is absent (`negated`: present)."""
    if field is None:
        return NEVER if negated else ALWAYS
    if field.kind == "document":
        return _document_one_of([None], negated=negated)
    return OneOf(field.column, (None,), negated=negated)


def _stored(field: Field, value: object) -> Scalar | None:
    """The stored value a document's `value` comes from; None if none can."""
    if field.kind == "id":  # kept as text: _id_one_of splits it
        return value if isinstance(value, str) and _HEX_ID.fullmatch(value) else None
    if field.kind == "text":
        return value if isinstance(value, str) else None
    if field.kind == "document" or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if field.kind == "number":
        return float(value)
    # No stored integer lies beyond MAX_INTEGER (and PostgreSQL refuses to compare one).
    return int(value) if float(value).is_integer() and abs(value) <= MAX_INTEGER else None


def _bound(field: Field, operator: Operator, operand: Scalar) -> tuple[Operator, Scalar] | None:
    """(operator, stored value) of a comparison; None if no value can satisfy it."""
    if field.kind == "document" or (field.kind == "text") != isinstance(operand, str):
        return None
    if isinstance(operand, str):
        return operator, operand
    if field.kind == "number" or float(operand).is_integer():
        return operator, float(operand) if field.kind == "number" else int(operand)
    # An integer column against 2.5: "> 2.5" is ">= 3", "<= 2.5" is "<= 2".
    if operator in (">", ">="):
        return ">=", math.ceil(operand)
    return "<=", math.floor(operand)


def _beyond_integers(field: Field, operator: Operator, bound: int) -> Condition:
    """A comparison with an integer no row holds: true of every present value or
    of none (`< 2^40` is "present", `> 2^40` never)."""
    below = operator in ("<", "<=")
    return _absent(field, negated=True) if below == (bound > 0) else NEVER


def _document_one_of(documents: list[dict[str, Any] | None], *, negated: bool) -> Condition:
    """`data` is one of `documents` (None: absent). Checked in Python: JSON
    equality differs between the backends, and an absent `data` may be stored
    as SQL NULL or as JSON null."""
    return Check(lambda record: (record.data in documents) != negated)


# ---------------------------------------------------------------- _id


def _id_parts(text: str) -> tuple[float, int]:
    """(whole seconds, row id) of an `_id`."""
    return float(int(text[:8], 16)), int(text[8:], 16)


def _same_second(seconds: float) -> Condition:
    return AllOf((Compare("time", ">=", seconds), Compare("time", "<", seconds + 1)))


def _id_one_of(texts: tuple[Value, ...], *, negated: bool) -> Condition:
    """`_id` equals one of `texts` (`negated`: none of them); `_id` is never absent.

    An action imported from Fishtest has its ObjectId for `_id` (`fishtest_id`),
    never the one its time and row would make."""
    parts: list[Condition] = []
    own_id = OneOf("fishtest_id", (None,))
    for text in texts:
        if text is None:
            continue
        imported = OneOf("fishtest_id", (str(text),), negated=negated)
        seconds, row = _id_parts(str(text))
        if row > MAX_INTEGER:  # no such row: only an imported action can have it
            parts.append(imported)
        elif negated:  # another row, or the same row in another second, or imported
            earlier, later = Compare("time", "<", seconds), Compare("time", ">=", seconds + 1)
            other = OneOf("fishtest_id", (None,), negated=True)
            elsewhere = AnyOf((OneOf("id", (row,), negated=True), earlier, later, other))
            parts.append(AllOf((elsewhere, imported)))
        else:
            this_row = AllOf((OneOf("id", (row,)), _same_second(seconds), own_id))
            parts.append(AnyOf((this_row, imported)))
    return AllOf(tuple(parts)) if negated else AnyOf(tuple(parts))


def _id_compare(operator: Operator, text: str) -> Condition:
    """`_id <operator> text`: by the second first, then by the row id."""
    seconds, row = _id_parts(text)
    if operator in (">", ">="):
        beyond = Compare("time", ">=", seconds + 1)
    else:
        beyond = Compare("time", "<", seconds)
    if row > MAX_INTEGER:  # no such row: every id of that second is below it
        rows: Condition = ALWAYS if operator in ("<", "<=") else NEVER
    else:
        rows = Compare("id", operator, row)
    within = AllOf((_same_second(seconds), rows))
    return AnyOf((beyond, within))
