"""Run submission validation: every rule with a good and a bad value."""

from typing import Any

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.git_names import check_ref
from arbiter.domain.run_args import (
    DEFAULT_BOOK,
    MAX_GAMES,
    SPRT_DEFAULT_GAMES,
    RunArgs,
    check_options,
    option_value,
    parse_run_args,
)
from arbiter.domain.time_control import TimeControl
from arbiter.stats.scheduling import game_duration

PARAMS = "KnightValue,781,600,1000,20,0.002\nBishopValue,825,700,950,20,0.002"


def submission(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "tests_repo": "https://github.com/alice/Stockfish",
        "new_tag": "better-eval",
    }
    raw.update(changes)
    return raw


def fails(raw: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        parse_run_args(raw)
    return caught.value


def test_minimal_submission_gets_the_defaults() -> None:
    args = parse_run_args(submission())
    assert isinstance(args, RunArgs)
    assert args.base_tag == "master"
    assert (args.tc, args.new_tc, args.threads) == ("10+0.1", "10+0.1", 1)
    assert (args.book, args.book_depth) == (DEFAULT_BOOK, 8)
    assert args.num_games == 60_000
    assert (args.priority, args.throughput) == (0.0, 100.0)
    assert (args.auto_purge, args.adjudication) == (False, True)
    assert (args.arch_filter, args.allowed_archs, args.compiler) == ("", None, "")
    assert (args.sprt, args.spsa) == (None, None)
    assert args.info == ""


def test_form_strings_are_accepted() -> None:
    args = parse_run_args(
        submission(
            threads="8",
            num_games="20000",
            priority="-1",
            throughput="50.5",
            auto_purge="on",
            adjudication="false",
            book_depth="12",
        )
    )
    assert (args.threads, args.num_games, args.priority, args.throughput) == (8, 20000, -1, 50.5)
    assert (args.auto_purge, args.adjudication, args.book_depth) == (True, False, 12)


def test_unknown_keys_are_ignored() -> None:
    assert parse_run_args(submission(csrf_token="x" * 64)).new_tag == "better-eval"


def test_first_bad_field_is_reported() -> None:
    error = fails(submission(tc="fast", threads=0, book="x.txt"))
    assert error.field == "tc"


# ------------------------------------------------------------ required fields


@pytest.mark.parametrize("field", ["tests_repo", "new_tag"])
def test_required_fields(field: str) -> None:
    raw = submission()
    del raw[field]
    error = fails(raw)
    assert error.field == field
    assert "required" in str(error)


# ------------------------------------------------------------ repository


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/alice/Stockfish",
        "http://git.example.org/engines/stockfish.git",
        "ssh://git@example.org:2222/alice/sf.git",
        "git://example.org/sf.git",
        "file:///srv/git/stockfish",
        "git@github.com:alice/Stockfish.git",
        "https://alice@example.org/sf.git",
    ],
)
def test_good_repo_urls(url: str) -> None:
    assert parse_run_args(submission(tests_repo=url)).tests_repo == url


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://example.org/sf.git", "git URL"),
        ("ext::sh -c touch% /tmp/pwned", "spaces"),
        ("ext::git-upload-pack", "git URL"),
        ("--upload-pack=touch /tmp/x", "spaces"),
        ("-uevil@host:path", "'-'"),
        ("https://github.com/alice/Stock fish", "spaces"),
        ("https://github.com/al\nice/sf", "control"),
        ("https://github.com/a\x00b", "control"),
        ("https://github.com/", "repository path"),
        ("https:///alice/sf", "host"),
        ("https://-oProxyCommand=x/sf", "host"),
        ("https://alice:s3cret@github.com/alice/sf", "password"),
        ("/srv/git/stockfish", "git URL"),
        ("host:path", "git URL"),
        ("alice@-host:path", "git URL"),
        ("x" * 501, "longer"),
    ],
)
def test_bad_repo_urls(url: str, words: str) -> None:
    error = fails(submission(tests_repo=url))
    assert error.field == "tests_repo"
    assert words in str(error)


def test_repo_url_surrounding_spaces_are_trimmed() -> None:
    raw = submission(tests_repo="  https://github.com/alice/Stockfish \n")
    assert parse_run_args(raw).tests_repo == "https://github.com/alice/Stockfish"


# ------------------------------------------------------------ refs


@pytest.mark.parametrize(
    "ref",
    [
        "master",
        "feature/new-eval",
        "v17.1",
        "sf_16",
        "refs/heads/main",
        "abcdef1",
        "0123456789abcdef0123456789abcdef01234567",
        "ünïcode",
    ],
)
def test_good_refs(ref: str) -> None:
    assert parse_run_args(submission(new_tag=ref, base_tag=ref)).new_tag == ref


@pytest.mark.parametrize(
    "ref",
    [
        "-delete",
        "has space",
        "a..b",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[b",
        "a\\b",
        "@",
        "a@{1}",
        "/a",
        "a/",
        "a//b",
        "a.",
        ".hidden",
        "a/.b",
        "a.lock",
        "a/b.lock/c",
        "tab\there",
        "del\x7f",
        "x" * 256,
    ],
)
@pytest.mark.parametrize("field", ["new_tag", "base_tag"])
def test_bad_refs(ref: str, field: str) -> None:
    error = fails(submission(**{field: ref}))
    assert error.field == field


def test_ref_message_explains() -> None:
    with pytest.raises(ValidationError, match=r"'a\.\.b' is not a valid branch or tag name"):
        check_ref("a..b", "new_tag")


# ------------------------------------------------------------ signatures


@pytest.mark.parametrize("field", ["base_signature", "new_signature"])
def test_signatures(field: str) -> None:
    assert getattr(parse_run_args(submission(**{field: "2593605"})), field) == "2593605"
    assert getattr(parse_run_args(submission(**{field: ""})), field) == ""
    for bad in ("12a", "-5", "1" * 21, "١٢٣"):
        assert fails(submission(**{field: bad})).field == field


# ------------------------------------------------------------ time controls


def test_new_tc_defaults_to_tc_and_time_odds() -> None:
    args = parse_run_args(submission(tc="60+0.6"))
    assert args.new_tc == "60+0.6"
    odds = parse_run_args(submission(tc="10+0.1", new_tc="20+0.2"))
    assert odds.new_time_control == TimeControl(None, 20.0, 0.2)
    expected = (game_duration("10+0.1") + game_duration("20+0.2")) / 2
    assert odds.game_duration() == pytest.approx(expected)
    assert parse_run_args(submission(tc="N=5000")).time_control.nodes == 5000


@pytest.mark.parametrize("field", ["tc", "new_tc"])
def test_bad_tc_fields(field: str) -> None:
    error = fails(submission(**{field: "10 + 0.1"}))
    assert error.field == field
    assert "[moves/]seconds[+increment]" in str(error)


# ------------------------------------------------------------ small numbers


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("threads", 1, 0),
        ("threads", "8", "eight"),
        ("threads", 64, True),
        ("threads", 1024, 1025),
        ("book_depth", 1, 0),
        ("book_depth", 40, 41),
        ("book_depth", "8", 8.5),
        ("throughput", 0, -1),
        ("throughput", 500, 500.5),
        ("throughput", "250", "lots"),
        ("priority", -2.5, float("nan")),
        ("priority", 1, float("inf")),
        ("priority", "3", [3]),
    ],
)
def test_numbers(field: str, good: Any, bad: Any) -> None:
    parse_run_args(submission(**{field: good}))
    assert fails(submission(**{field: bad})).field == field


@pytest.mark.parametrize(
    ("field", "good", "bad"), [("auto_purge", True, "maybe"), ("adjudication", "no", 2)]
)
def test_bools(field: str, good: Any, bad: Any) -> None:
    parse_run_args(submission(**{field: good}))
    assert fails(submission(**{field: bad})).field == field


# ------------------------------------------------------------ num_games


@pytest.mark.parametrize("games", [2, 1000, 60_002, MAX_GAMES])
def test_good_num_games(games: int) -> None:
    assert parse_run_args(submission(num_games=games)).num_games == games


@pytest.mark.parametrize(
    ("games", "words"),
    [(0, "between"), (-2, "between"), (7, "even"), (MAX_GAMES + 2, "between"), ("1e5", "whole")],
)
def test_bad_num_games(games: Any, words: str) -> None:
    error = fails(submission(num_games=games))
    assert error.field == "num_games"
    assert words in str(error)


# ------------------------------------------------------------ book and options


@pytest.mark.parametrize("book", ["UHO_Lichess_4852_v1.epd", "8moves_v3.pgn", "noob-3moves.epd"])
def test_good_books(book: str) -> None:
    assert parse_run_args(submission(book=book)).book == book


@pytest.mark.parametrize(
    "book",
    ["book.txt", "../etc/passwd.epd", "books/a.pgn", "a\\b.epd", ".epd", "-x.epd", "a.epd.gz"],
)
def test_bad_books(book: str) -> None:
    assert fails(submission(book=book)).field == "book"


@pytest.mark.parametrize("field", ["base_options", "new_options"])
def test_options(field: str) -> None:
    args = parse_run_args(submission(**{field: " Hash=64  Threads=1 SyzygyPath= "}))
    assert getattr(args, field) == "Hash=64 Threads=1 SyzygyPath="
    for bad in ("Hash", "=64", "Hash=16 hash=32", "Hash=16\tThreads=1", "Hash=16é", "Hash=1\x00"):
        assert fails(submission(**{field: bad})).field == field


def test_option_messages() -> None:
    with pytest.raises(ValidationError, match="'Hash' is not of the form Name=Value"):
        check_options("Hash", "new_options")
    with pytest.raises(ValidationError, match="given twice"):
        check_options("Hash=1 HASH=2", "new_options")


def test_option_value() -> None:
    assert option_value("Hash=64 Threads=2", "hash") == "64"
    assert option_value("Threads=2", "Hash") is None


# ------------------------------------------------------------ arch filter and compiler


def test_arch_filter_precomputes_the_matching_archs() -> None:
    args = parse_run_args(submission(arch_filter="avx512|vnni"))
    assert args.arch_filter == "avx512|vnni"
    assert args.allowed_archs == frozenset(
        {"x86-64-avx512icl", "x86-64-vnni512", "x86-64-avx512", "x86-64-avxvnni"}
    )


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("avx[", "not a valid regular expression"),
        ("(", "not a valid regular expression"),
        ("sparc", "matches none"),
        ("^unknown$", "matches none"),
        ("a" * 201, "longer"),
        ("(.*.*.*.*.*.*)*!", "too long"),
    ],
)
def test_bad_arch_filters(pattern: str, words: str) -> None:
    error = fails(submission(arch_filter=pattern))
    assert error.field == "arch_filter"
    assert words in str(error)


@pytest.mark.parametrize("compiler", ["", "g++", "clang++"])
def test_good_compilers(compiler: str) -> None:
    assert parse_run_args(submission(compiler=compiler)).compiler == compiler


@pytest.mark.parametrize("compiler", ["gcc", "clang", "G++", 1])
def test_bad_compilers(compiler: Any) -> None:
    assert fails(submission(compiler=compiler)).field == "compiler"


# ------------------------------------------------------------ info


def test_info() -> None:
    text = "Better eval.\n\nBench: 2593605\tok"
    assert parse_run_args(submission(info=f"  {text}\n")).info == text
    assert parse_run_args(submission(info="x" * 10_000)).info == "x" * 10_000
    assert fails(submission(info="x" * 10_001)).field == "info"
    assert fails(submission(info="nul\x00")).field == "info"
    assert fails(submission(info=42)).field == "info"


# ------------------------------------------------------------ SPRT


def test_sprt_defaults() -> None:
    args = parse_run_args(submission(sprt={"elo0": 0, "elo1": 2}))
    assert args.sprt is not None
    assert (args.sprt.elo0, args.sprt.elo1) == (0.0, 2.0)
    assert (args.sprt.alpha, args.sprt.beta, args.sprt.elo_model) == (0.05, 0.05, "normalized")
    assert args.sprt.batch_size is None  # the reference's formula, applied with the run's TC
    assert args.num_games == SPRT_DEFAULT_GAMES
    assert args.spsa is None


def test_sprt_explicit_values() -> None:
    raw = submission(
        sprt={
            "elo0": "-1.75",
            "elo1": "0.25",
            "alpha": 0.1,
            "beta": "0.2",
            "elo_model": "BayesElo",
            "batch_size": "4",
        },
        num_games=100_000,
    )
    args = parse_run_args(raw)
    assert args.sprt is not None
    assert (args.sprt.elo0, args.sprt.alpha, args.sprt.beta) == (-1.75, 0.1, 0.2)
    assert args.sprt.elo_model == "BayesElo"
    assert args.sprt.batch_size == 4
    assert args.num_games == 100_000


@pytest.mark.parametrize(
    ("sprt", "field", "words"),
    [
        ({"elo1": 2}, "sprt.elo0", "required"),
        ({"elo0": 0}, "sprt.elo1", "required"),
        ({"elo0": 2, "elo1": 2}, "sprt.elo1", "greater than elo0"),
        ({"elo0": 2, "elo1": 0}, "sprt.elo1", "greater than elo0"),
        ({"elo0": 0, "elo1": 2, "alpha": 0}, "sprt.alpha", "between 0 and 0.5"),
        ({"elo0": 0, "elo1": 2, "alpha": 0.5}, "sprt.alpha", "between 0 and 0.5"),
        ({"elo0": 0, "elo1": 2, "beta": -0.1}, "sprt.beta", "between 0 and 0.5"),
        ({"elo0": 0, "elo1": 2, "elo_model": "linear"}, "sprt.elo_model", "normalized"),
        ({"elo0": "zero", "elo1": 2}, "sprt.elo0", "number"),
        ({"elo0": 0, "elo1": 2, "batch_size": 0}, "sprt.batch_size", "between 1 and 1,000"),
        ({"elo0": 0, "elo1": 2, "batch_size": 1001}, "sprt.batch_size", "between 1 and 1,000"),
        ({"elo0": 0, "elo1": 2, "batch_size": 2.5}, "sprt.batch_size", "whole number"),
        ({"elo0": 0, "elo1": 2, "batch_size": True}, "sprt.batch_size", "whole number"),
        ({"elo0": 0, "elo1": 2, "batch_size": "many"}, "sprt.batch_size", "whole number"),
    ],
)
def test_bad_sprt(sprt: dict[str, Any], field: str, words: str) -> None:
    error = fails(submission(sprt=sprt))
    assert error.field == field
    assert words in str(error)


def test_an_sprt_batch_must_fit_in_the_game_cap() -> None:
    assert parse_run_args(submission(sprt={"elo0": 0, "elo1": 2, "batch_size": 5}, num_games=10))
    error = fails(submission(sprt={"elo0": 0, "elo1": 2, "batch_size": 6}, num_games=10))
    assert error.field == "sprt.batch_size"
    assert "more than num_games (10 games) allows" in str(error)


def test_sprt_must_be_an_object() -> None:
    assert fails(submission(sprt="0,2")).field == "sprt"


# ------------------------------------------------------------ SPSA


def test_constant_gains_are_allowed() -> None:
    """A = alpha = gamma = 0, as Autoselect chooses (the reference allows them)."""
    spsa = {"raw_params": PARAMS, "A": 0, "alpha": 0, "gamma": 0}
    args = parse_run_args(submission(spsa=spsa, num_games=60_000))
    assert args.spsa is not None
    assert (args.spsa.A, args.spsa.alpha, args.spsa.gamma) == (0.0, 0.0, 0.0)
    assert all(param.c == param.c_end for param in args.spsa.params)


def test_spsa_defaults_and_params() -> None:
    args = parse_run_args(submission(spsa={"raw_params": PARAMS}, num_games=60_000))
    assert args.spsa is not None
    assert (args.spsa.A, args.spsa.alpha, args.spsa.gamma) == (0.1, 0.602, 0.101)
    assert [p.name for p in args.spsa.params] == ["KnightValue", "BishopValue"]
    assert args.spsa.schedule.num_iter == 30_000
    assert args.spsa.schedule.big_a == 3000
    assert args.spsa.raw_params == PARAMS
    assert args.sprt is None


@pytest.mark.parametrize(
    ("games", "ok"), [(1000, True), (60_000, True), (1500, False), (998, False), (500, False)]
)
def test_spsa_games_are_thousands(games: int, ok: bool) -> None:
    raw = submission(spsa={"raw_params": PARAMS}, num_games=games)
    if ok:
        assert parse_run_args(raw).num_games == games
    else:
        assert fails(raw).field == "num_games"


@pytest.mark.parametrize(
    ("spsa", "field", "words"),
    [
        ({"raw_params": ""}, "spsa.raw_params", "no parameters"),
        ({"raw_params": "a,1,0,2,1"}, "spsa.raw_params", "6 comma-separated"),
        ({"raw_params": "a,1,0,2,0,0.002"}, "spsa.raw_params", "c_end"),
        ({"raw_params": "a,1,0,2,1,-1"}, "spsa.raw_params", "r_end"),
        ({"raw_params": "a,5,0,2,1,0.1"}, "spsa.raw_params", "within"),
        ({"raw_params": "a,x,0,2,1,0.1"}, "spsa.raw_params", "not a number"),
        ({"raw_params": "a,1,0,2,1,0\na,1,0,2,1,0"}, "spsa.raw_params", "twice"),
        ({"raw_params": PARAMS, "A": -0.1}, "spsa.A", "at least 0"),
        ({"raw_params": PARAMS, "alpha": -0.1}, "spsa.alpha", "[0, 1]"),
        ({"raw_params": PARAMS, "gamma": 1.5}, "spsa.gamma", "[0, 1]"),
    ],
)
def test_bad_spsa(spsa: dict[str, Any], field: str, words: str) -> None:
    error = fails(submission(spsa=spsa))
    assert error.field == field
    assert words in str(error)


def test_sprt_and_spsa_together_are_refused() -> None:
    error = fails(submission(sprt={"elo0": 0, "elo1": 2}, spsa={"raw_params": PARAMS}))
    assert error.field == "spsa"
    assert "not both" in str(error)


def test_run_args_are_frozen() -> None:
    args = parse_run_args(submission())
    with pytest.raises(AttributeError):
        args.num_games = 2  # type: ignore[misc]
