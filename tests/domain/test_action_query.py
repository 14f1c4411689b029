"""MongoDB-style queries over the audit log: what SQL answers is what MongoDB's
rules give on the documents `to_wire` shows, on both backends.

`mongo_matches` below is an independent reading of those rules over plain
documents (no SQL, no parser of ours); hypothesis draws queries and the
search must agree with it, order included.

One deviation is deliberate, and the oracle follows it: `_id` is compared as
the 24-hex string the API shows. MongoDB stores an ObjectId, which no JSON
string equals, so the reference answers `{"_id": "<hex>"}` with nothing; JSON
has no ObjectId, so Arbiter lets the string stand for it
(`test_an_id_is_matched_by_the_string_the_api_shows`).
"""

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from arbiter.domain.action_query import parse_search
from arbiter.domain.actions import Actions, record, wire_id
from arbiter.domain.errors import BadRequest
from arbiter.storage import Storage
from arbiter.storage.action_search import ActionSearch, SearchTooLong
from arbiter.storage.base import NewAction
from tests.domain.support import T0

# ---------------------------------------------------------------- the documents

NAMES = ["alice", "Bob", "bob", "carol", "ünïcode", "arbiter.system"]
KINDS = ["new_run", "finished_run", "failed_task", "upload_nn", "log_message", "dead_task"]
RUNS = ["a" * 24, "0123456789abcdef01234567", "b" * 24]
WORKERS = ["alice-4cores-1a2b", "bob-16cores-ffff", "carol-1cores-0000"]
MESSAGES = ["", "Result:accepted Elo:2.10", "crash", "Crash\nsecond line", "ünïcode ✓"]
# Times on both sides of whole seconds: `_id` starts with the whole second.
OFFSETS = [0.0, 0.25, 0.999, 1.0, 1.5, 2.0, 59.75, 60.0, 3600.5]


def corpus() -> list[dict[str, Any]]:
    """About 60 actions that cover every field's absent, empty and odd values."""
    entries = []
    for index in range(60):
        kind = KINDS[index % len(KINDS)]
        entry: dict[str, Any] = {
            "time": T0 + OFFSETS[index % len(OFFSETS)] + 10 * (index // 20),
            "action": kind,
            "username": NAMES[index % len(NAMES)],
            "message": MESSAGES[index % len(MESSAGES)],
        }
        if index % 3:
            entry["run_id"] = RUNS[index % len(RUNS)]
            entry["run"] = f"tag-{index % 4}-{entry['run_id'][:7]}"
        if index % 4 == 1:
            entry["task_id"] = index % 5
            entry["worker"] = WORKERS[index % len(WORKERS)]
        if index % 7 == 2:
            entry["user"] = NAMES[(index + 1) % len(NAMES)]
        if kind == "upload_nn":
            entry["data"] = {"nn": f"nn-{index:012x}.nnue"}
        entries.append(entry)
    return entries


@pytest.fixture
def log(storage: Storage) -> Actions:
    with storage.write() as tx:
        for entry in corpus():
            record(tx, NewAction(**entry))
    return Actions(storage)


def everything(actions: Actions) -> list[dict[str, Any]]:
    return actions.search({"max_count": 200})


# ---------------------------------------------------------------- MongoDB's rules


def _same_type(value: Any, operand: Any) -> bool:
    def kind(item: Any) -> str:
        if isinstance(item, bool):
            return "bool"
        return "number" if isinstance(item, int | float) else type(item).__name__

    return kind(value) == kind(operand)


def _equal(document: dict[str, Any], field: str, operand: Any) -> bool:
    if operand is None:
        return field not in document
    return (
        field in document and _same_type(document[field], operand) and (document[field] == operand)
    )


def _compare(document: dict[str, Any], field: str, operator: str, operand: Any) -> bool:
    if field not in document or not _same_type(document[field], operand):
        return False
    value = document[field]
    return {
        "$gt": value > operand,
        "$gte": value >= operand,
        "$lt": value < operand,
        "$lte": value <= operand,
    }[operator]


SET_TESTS = {
    "$eq": _equal,
    "$ne": lambda document, field, operand: not _equal(document, field, operand),
    "$in": lambda document, field, operand: any(_equal(document, field, i) for i in operand),
    "$nin": lambda document, field, operand: not any(_equal(document, field, i) for i in operand),
    "$exists": lambda document, field, operand: (field in document) == bool(operand),
}


def _operator(document: dict[str, Any], field: str, name: str, operand: Any, flags: int) -> bool:
    if name in SET_TESTS:
        return bool(SET_TESTS[name](document, field, operand))
    if name == "$regex":
        value = document.get(field)
        return isinstance(value, str) and re.search(operand, value, flags) is not None
    return _compare(document, field, name, operand)


def _operators_match(document: dict[str, Any], field: str, condition: dict[str, Any]) -> bool:
    flags = re.IGNORECASE if "i" in condition.get("$options", "") else 0
    return all(
        not _operators_match(document, field, operand)
        if name == "$not"
        else _operator(document, field, name, operand, flags)
        for name, operand in condition.items()
        if name != "$options"
    )


def mongo_matches(document: dict[str, Any], query: dict[str, Any]) -> bool:
    for key, condition in query.items():
        if key == "$and":
            ok = all(mongo_matches(document, part) for part in condition)
        elif key == "$or":
            ok = any(mongo_matches(document, part) for part in condition)
        elif key == "$nor":
            ok = not any(mongo_matches(document, part) for part in condition)
        elif isinstance(condition, dict) and any(name.startswith("$") for name in condition):
            ok = _operators_match(document, key, condition)
        else:
            ok = _equal(document, key, condition)
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- queries


def operands(documents: list[dict[str, Any]], field: str) -> st.SearchStrategy[Any]:
    """Values the field has, values near them, and values of the wrong type."""
    seen = sorted({repr(d[field]): d[field] for d in documents if field in d}.values(), key=repr)
    near: list[Any] = [None, 0, -1.5, "", "zzz", "a", "B", T0 + 1, T0 + 0.5, 2.5, 3, True]
    near += [2**40, -(2**40), 2**31 - 1]  # beyond a 32-bit INTEGER column
    if field == "_id":
        near += [value[:8] + "f" * 16 for value in seen] + [
            value[:7] + "0" + value[8:] for value in seen
        ]
        near = [item for item in near if not isinstance(item, str) or len(item) == 24]
    return st.sampled_from(seen) | st.sampled_from(near) if seen else st.sampled_from(near)


FIELDS = ["_id", "time", "action", "username", "run_id", "run", "task_id", "worker", "user"]
FIELDS += ["message", "nn", "data", "no_such_field"]
SAFE_PATTERNS = ["^a", "ice$", "(?:bob|carol)", "[0-9]+", "^$", "Elo", "crash", "^00", "c.*s", "✓"]


@st.composite
def field_conditions(draw: st.DrawFn, documents: list[dict[str, Any]]) -> dict[str, Any]:
    field = draw(st.sampled_from(FIELDS))
    value = operands(documents, field)
    kind = draw(st.sampled_from(["eq", "ops", "ops", "regex"]))
    if kind == "eq":
        return {field: draw(value)}
    if kind == "regex":
        condition: dict[str, Any] = {"$regex": draw(st.sampled_from(SAFE_PATTERNS))}
        if draw(st.booleans()):
            condition["$options"] = "i"
        return {field: condition}
    names = draw(
        st.lists(
            st.sampled_from(["$eq", "$ne", "$in", "$nin", "$exists", "$gt", "$gte", "$lt", "$lte"]),
            min_size=1,
            max_size=2,
            unique=True,
        )
    )
    condition = {}
    for name in names:
        if name in ("$in", "$nin"):
            condition[name] = draw(st.lists(value, max_size=4))
        elif name == "$exists":
            condition[name] = draw(st.booleans())
        elif name.startswith(("$gt", "$lt")):
            operand = draw(
                value.filter(
                    lambda item: isinstance(item, int | float | str) and not isinstance(item, bool)
                )
            )
            if field == "_id" and not (isinstance(operand, str) and len(operand) == 24):
                operand = draw(
                    operands(documents, "_id").filter(
                        lambda item: isinstance(item, str) and len(item) == 24
                    )
                )
            condition[name] = operand
        else:
            condition[name] = draw(value)
    return {field: condition}


def negated(condition: dict[str, Any]) -> dict[str, Any]:
    """A field condition under `$not` (a plain value becomes its `$eq`)."""
    ((field, inner),) = condition.items()
    if not (isinstance(inner, dict) and any(name.startswith("$") for name in inner)):
        inner = {"$eq": inner}
    return {field: {"$not": inner}}


def queries(documents: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    conditions = field_conditions(documents)
    leaf = st.one_of(conditions, conditions, conditions.map(negated))

    def combine(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        parts = st.lists(inner, min_size=1, max_size=3)
        return st.one_of(
            parts.map(lambda items: {"$and": items}),
            parts.map(lambda items: {"$or": items}),
            parts.map(lambda items: {"$nor": items}),
            parts.map(lambda items: {k: v for item in items for k, v in item.items()}),
        )

    return st.recursive(leaf, combine, max_leaves=6)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_search_agrees_with_mongodb_rules(log: Actions, data: st.DataObject) -> None:
    documents = everything(log)
    query = data.draw(queries(documents), label="query")
    expected = [document for document in documents if mongo_matches(document, query)]
    # About a quarter of the queries match nothing and a seventh match all
    # (pytest --hypothesis-show-statistics): most compare real selections.
    share = "none" if not expected else "all" if expected == documents else "some"
    event(f"matches: {share}")
    assert log.search({**query, "max_count": 200}) == expected


def test_the_corpus_is_whole(log: Actions) -> None:
    documents = everything(log)
    assert len(documents) == len(corpus())
    assert [d["time"] for d in documents] == sorted(d["time"] for d in documents)
    assert sum("nn" in d for d in documents) == 10


# ---------------------------------------------------------------- examples


def ids(found: list[dict[str, Any]]) -> list[str]:
    return [document["_id"] for document in found]


def test_at_most_200_oldest_first(storage: Storage) -> None:
    with storage.write() as tx:
        for index in range(250):
            record(tx, NewAction(time=T0 + 250 - index, action="log_message", username="u"))
    found = Actions(storage).search({})
    assert len(found) == 200
    assert [d["time"] for d in found] == [T0 + 1 + index for index in range(200)]
    assert len(Actions(storage).search({"max_count": 3})) == 3


def test_before_pages_backwards_newest_first(log: Actions) -> None:
    documents = everything(log)
    older = log.search({"before": documents[30]["time"], "max_count": 5})
    expected = [d for d in documents if d["time"] < documents[30]["time"]][::-1][:5]
    assert older == expected


def test_id_ranges_follow_the_log(log: Actions) -> None:
    documents = everything(log)
    pivot = documents[17]["_id"]
    after = log.search({"_id": {"$gt": pivot}})
    # By second, then row: within a second that is not the order of time.
    assert ids(after) == [d["_id"] for d in documents if d["_id"] > pivot]
    assert len(after) > len(documents) // 2
    assert log.search({"_id": pivot}) == [documents[17]]
    assert log.search({"_id": pivot[:8] + "0" * 16}) == []


def test_an_id_is_matched_by_the_string_the_api_shows(log: Actions) -> None:
    """Unlike the reference (MongoDB compares an ObjectId with a string as
    unequal, so `{"_id": "<hex>"}` finds nothing there), an action is found by
    the `_id` string its own listing gave, in equality and in `$in`."""
    documents = everything(log)
    wanted = [documents[3], documents[40]]
    assert log.search({"_id": wanted[0]["_id"]}) == [wanted[0]]
    assert log.search({"_id": {"$in": [d["_id"] for d in wanted]}}) == wanted
    assert log.search({"_id": {"$ne": wanted[0]["_id"]}, "max_count": 200}) == [
        d for d in documents if d is not wanted[0]
    ]


def test_regex_on_id_and_message(log: Actions) -> None:
    documents = everything(log)
    assert log.search({"message": {"$regex": "^crash$", "$options": "i"}}) == [
        d for d in documents if d["message"].lower() == "crash"
    ]
    suffix = documents[5]["_id"][-4:]
    assert documents[5] in log.search({"_id": {"$regex": suffix + "$"}})


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"$where": "sleep(100)"}, "unknown operator: $where"),
        ({"time": {"$gt": 0, "$foo": 1}}, "unknown operator: $foo"),
        ({"$nand": [{"action": "x"}]}, "unknown operator: $nand"),
        ({"$nor": []}, "$nor: expected a non-empty array of queries"),
        ({"action": {"$not": "x"}}, "action.$not: expected an object of operators"),
        ({"action": {"$not": {}}}, "action.$not: expected an object of operators"),
        ({"action": {"$not": {"$foo": 1}}}, "unknown operator: $foo"),
        ({"$and": []}, "$and: expected a non-empty array of queries"),
        ({"$or": {"action": "x"}}, "$or: expected a non-empty array of queries"),
        ({"$and": ["action"]}, "expected a query object"),
        ({"action": {"$in": "new_run"}}, "action.$in: expected an array"),
        ({"time": {"$gt": None}}, "time.$gt: expected a number or a string"),
        ({"time": {"$lt": [1]}}, "time.$lt: expected a number or a string"),
        ({"_id": {"$gt": "12"}}, "_id.$gt: expected an _id (24 lowercase hex digits)"),
        ({"task_id": 2**60}, "task_id: numbers must lie within ±2^53"),
        ({"username": "a\x00b"}, "username: strings cannot hold NUL characters"),
        ({"message": {"$regex": "a*b*"}}, "message.$regex: at most one unbounded repeat"),
        ({"message": {"$regex": "(a+)+$"}}, "message.$regex: a group cannot be repeated"),
        ({"message": {"$regex": "("}}, "message.$regex: missing ), unterminated subpattern"),
        ({"message": {"$regex": 5}}, "message.$regex: expected a pattern string"),
        ({"message": {"$regex": "a", "$options": "x"}}, "message.$regex: option 'x'"),
        ({"message": {"$options": "i"}}, "message: $options without $regex"),
        ({"user": {"$exists": "yes"}}, "user.$exists: expected true or false"),
        ({"max_count": "10"}, "max_count: expected an integer"),
        ({"before": True}, "before: expected a Unix time in seconds"),
        ({"action": {"$in": list(range(1001))}}, "action.$in: a query compares with at most"),
    ],
)
def test_refusals_name_the_culprit(log: Actions, query: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest) as refused:
        log.search(query)
    assert message in str(refused.value)


def test_nesting_is_bounded(log: Actions) -> None:
    query: dict[str, Any] = {"action": "new_run"}
    for _ in range(20):
        query = {"$and": [query]}
    with pytest.raises(BadRequest, match="nest at most 16 deep"):
        log.search(query)


def test_a_regex_search_that_scans_too_long_is_refused(storage: Storage) -> None:
    with storage.write() as tx:
        for index in range(600):
            record(
                tx,
                NewAction(time=T0 + index, action="log_message", username="u", message="x" * 100),
            )
    search = parse_search({"message": {"$regex": "y"}}, wire_id)
    with storage.read() as tx, pytest.raises(SearchTooLong):
        tx.actions.search(ActionSearch(where=search.where, scan_seconds=0.0))
    # Within the domain's 2 s budget the whole log is checked: nothing matches.
    assert Actions(storage).search({"message": {"$regex": "y"}}) == []
