"""Fishtest's users as Arbiter accounts: a name signup would refuse is
skipped with its reason (look-alikes, markup, line breaks, paths, NULs)."""

import pytest

from arbiter.importer.others import convert_user
from arbiter.importer.runs import Skip


@pytest.mark.parametrize(
    "name",
    [
        "\u0410lice",  # a Cyrillic capital A
        "<b>bold</b>",
        "two\nlines",
        "../../../etc",
        "bob\x00evil",
        "x",
        "a" * 33,
        "with space",
    ],
)
def test_a_name_signup_would_refuse_is_skipped(name: str) -> None:
    with pytest.raises(Skip, match="breaks signup's rule"):
        convert_user({"username": name, "password": "x"})


def test_a_name_signup_accepts_is_kept() -> None:
    fields = convert_user({"username": "Vondele2", "password": "x"})
    assert (fields.row["username"], fields.row["username_key"]) == ("Vondele2", "vondele2")
