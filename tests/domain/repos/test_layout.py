"""The engine layout file and what it reads: nets by marker, bench by prefix."""

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.layout import STOCKFISH, EngineLayout, bench_of, net_names, parse_layout


def test_stockfish_nets_are_the_quoted_names_beside_their_markers() -> None:
    source = (
        '#define EvalFileDefaultNameBig "nn-1111111111aa.nnue"\n'
        "// EvalFileDefaultNameSmall below\n"
        '#define EvalFileDefaultNameSmall "nn-2222222222bb.nnue"\n'
        '#define Other "nn-3333333333cc.nnue"\n'
    )
    assert net_names(STOCKFISH, source) == ["nn-1111111111aa.nnue", "nn-2222222222bb.nnue"]


def test_bench_is_the_last_matching_line() -> None:
    message = "Tune\n\nbench: 123\nSome text\nBench: 4567 (was 123)\n"
    assert bench_of(STOCKFISH, message) == "4567"
    assert bench_of(STOCKFISH, "No bench here\nBench: none") is None
    assert bench_of(EngineLayout(bench_prefix="Nodes:"), "Nodes:   42") == "42"


def test_a_layout_file_with_every_key() -> None:
    layout = parse_layout('[nets]\nfile = "a/b.h"\nnames = ["X", "Y_2"]\n[bench]\nprefix = "N:"\n')
    assert layout == EngineLayout("a/b.h", ("X", "Y_2"), "N:", declared=True)
    assert parse_layout("") == EngineLayout(declared=True)  # no nets, the usual bench line


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[nets", "is not valid TOML"),
        ('nets = "x"', "[nets] must be a table"),
        ('[nets]\nfile = "/etc/passwd"', "relative path"),
        ('[nets]\nfile = "src/../../x"', "relative path"),
        ("[nets]\nfile = 3", "nets.file must be a string"),
        ('[nets]\nnames = ["not an identifier"]', "list of identifiers"),
        ('[nets]\nnames = "X"', "list of identifiers"),
        ('[bench]\nprefix = "' + "x" * 40 + '"', "one short line"),
    ],
)
def test_mistakes_name_the_key(text: str, complaint: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_layout(text)
    assert complaint in str(refused.value)
    assert str(refused.value).startswith("arbiter-engine.toml of the new commit: ")


def test_the_base_sides_mistake_names_the_base() -> None:
    with pytest.raises(ValidationError) as refused:
        parse_layout("[nets", side="base")
    assert refused.value.field == "base_tag"
    assert str(refused.value).startswith("arbiter-engine.toml of the base commit: ")
