"""A run's spec: the reference's `args` object read into typed fields and
written back as it came, unknown keys included, on both backends."""

import msgspec
import pytest

from arbiter.domain.runs.documents import new_run_record, wire_args
from arbiter.stats.sprt import new_sprt
from arbiter.storage import Storage
from arbiter.storage.run_spec import RunSpec, checked_spec, spec_document, spec_of

# Keys a Fishtest dump may carry that Arbiter has no field for.
UNKNOWN = {"master_repo": "https://github.com/official-stockfish/Stockfish", "extra": [1, 2]}


def sprt_spec() -> RunSpec:
    return RunSpec(
        tc="10+0.1", new_tc="10+0.1", num_games=800_000, new_tag="patch", sprt=new_sprt()
    )


def test_a_document_reads_back_as_it_was_written() -> None:
    document = {**spec_document(sprt_spec()), **UNKNOWN}
    spec = spec_of(document)
    assert spec.extra == UNKNOWN  # a key named "extra" is an unknown key like any other
    assert spec.sprt == document["sprt"]
    assert spec_document(spec) == document


def test_a_run_without_a_stop_rule_has_neither_key() -> None:
    document = spec_document(RunSpec(tc="10+0.1"))
    assert "sprt" not in document
    assert "spsa" not in document
    assert spec_of(document) == RunSpec(tc="10+0.1", new_tc="10+0.1")


def test_the_book_depth_is_a_number_stored_as_the_references_text() -> None:
    spec = spec_of({"tc": "10+0.1", "book_depth": "12"})
    assert spec.book_depth == 12
    assert spec_document(spec)["book_depth"] == "12"
    assert wire_args(spec)["book_depth"] == "12"


def test_an_absent_new_tc_reads_as_the_tc() -> None:
    assert spec_of({"tc": "60+0.6"}).new_tc == "60+0.6"
    assert spec_of({"tc": "60+0.6", "new_tc": "30+0.3"}).new_tc == "30+0.3"


def test_the_wire_shows_unknown_keys_and_hides_arbiters_own() -> None:
    spec = evolve_spec(allowed_archs=["x86-64-avx2"], extra={"master_repo": "r"})
    shown = wire_args(spec)
    assert shown["master_repo"] == "r"
    assert "allowed_archs" not in shown
    assert "arch_filter" not in shown  # empty: the reference has the key only when set


def evolve_spec(**changes: object) -> RunSpec:
    return msgspec.structs.replace(sprt_spec(), **changes)


def test_a_checked_spec_reads_numbers_written_as_text() -> None:
    spec = checked_spec({"tc": "10+0.1", "threads": "2", "throughput": 100, "auto_purge": "true"})
    assert (spec.threads, spec.throughput, spec.auto_purge) == (2, 100.0, True)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"tc": "10+0.1", "threads": "many"}, "threads"),
        ({"tc": 10}, "tc"),
        ({"tc": "10+0.1", "sprt": {"elo0": 0}}, "sprt"),
        ({"tc": "10+0.1", "base_nets": "nn.nnue"}, "base_nets"),
    ],
)
def test_a_checked_spec_names_the_field_of_a_wrong_type(document: dict, field: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=field):
        checked_spec(document)


def test_a_checked_spec_keeps_the_stop_rules_own_keys() -> None:
    sprt = {**new_sprt(), "from_an_older_version": 1}
    assert checked_spec({"tc": "10+0.1", "sprt": sprt}).sprt == sprt


def test_a_spec_is_stored_and_read_back_equal(storage: Storage) -> None:
    spec = evolve_spec(extra=UNKNOWN, allowed_archs=["x86-64-bmi2"])
    run = new_run_record("a" * 24, "alice", spec, 0.0)
    with storage.write() as tx:
        tx.runs.add(run)
    with storage.read() as tx:
        stored = tx.runs.get(run.id)
    assert stored is not None
    assert stored.args == spec
