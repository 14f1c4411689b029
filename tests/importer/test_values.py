"""BSON values made plain: every number type as a Python int or float (an
Int64 would stop a JSON encoder), and text without NULs."""

import math
from decimal import Decimal

import msgspec
import pytest
from bson.decimal128 import Decimal128
from bson.int64 import Int64

from arbiter.importer.values import integer, number, plain, text


def test_every_bson_number_comes_out_as_a_python_number() -> None:
    document = {
        "int32": 7,
        "int64": Int64(2**40),
        "double": 0.5,
        "whole": Decimal128(Decimal("12")),
        "fraction": Decimal128(Decimal("0.25")),
        "nested": [Int64(3), {"deep": Int64(-4)}],
        "flag": True,
    }
    made = plain(document)
    assert made == {
        "int32": 7,
        "int64": 2**40,
        "double": 0.5,
        "whole": 12,
        "fraction": 0.25,
        "nested": [3, {"deep": -4}],
        "flag": True,
    }
    assert type(made["int64"]) is int
    assert type(made["nested"][1]["deep"]) is int
    assert msgspec.json.decode(msgspec.json.encode(made)) == made


def test_a_decimal128_infinity_is_text_like_any_non_finite_number() -> None:
    assert plain(Decimal128("Infinity")) == "inf"
    assert math.isnan(number(Decimal128("NaN"), default=math.nan))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(Int64(5), 5), (Decimal128("6"), 6), (Decimal128("6.5"), 6), (2.9, 2), (True, 1), ("7", 0)],
)
def test_integer_takes_every_number_type(value: object, expected: int) -> None:
    made = integer(value)
    assert (made, type(made)) == (expected, int)


@pytest.mark.parametrize(
    ("value", "expected"), [(Int64(5), 5.0), (Decimal128("0.125"), 0.125), (True, 0.0)]
)
def test_number_takes_every_number_type(value: object, expected: float) -> None:
    assert number(value) == expected


def test_text_loses_its_nuls_before_it_is_clipped() -> None:
    assert text("ali\x00ce", 64) == "alice"
    assert text("a\x00" * 10, 3) == "aaa"
    assert plain({"k\x00ey": ["v\x00"]}) == {"key": ["v"]}
