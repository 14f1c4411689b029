"""Validation of a run submission into `RunArgs` (reference 3.1, 6 and 8).

Pure: no storage, no network. `parse_run_args` takes the submitted values (a
form's strings or a script's JSON values) and raises `ValidationError` for the
first bad field, in the order of the submission form, with a message the test
author can act on. Resolving the tags to SHAs is `arbiter.domain.repos`'s job.

Field names are the reference's; nested stop-rule fields are named
`sprt.<name>` / `spsa.<name>` in errors. Keys that are not run arguments are
ignored (a form also posts its CSRF token).
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from arbiter.domain.arch_filter import matching_archs
from arbiter.domain.errors import ValidationError
from arbiter.domain.form_values import read_bool, read_float, read_int, read_text
from arbiter.domain.repos.git_names import check_ref, check_repo_url
from arbiter.domain.time_control import TimeControl, parse_time_control
from arbiter.protocol.books import SHIPPED_BOOK
from arbiter.stats.spsa import (
    DEFAULT_A_RATIO,
    DEFAULT_ALPHA,
    DEFAULT_GAMMA,
    SpsaParam,
    SpsaParseError,
    SpsaSchedule,
    make_schedule,
    parse_params,
)

MAX_GAMES = 3_200_000
DEFAULT_GAMES = 60_000
SPRT_DEFAULT_GAMES = 800_000  # the cap an SPRT run gets when none is given
SPSA_GAMES_STEP = 1000
MAX_THREADS = 1024  # far above any worker; keeps the memory formula sane
MAX_INFO_CHARS = 10_000
MAX_OPTIONS_CHARS = 1000
MAX_THROUGHPUT = 500.0
# The default when no catalogue offers the reference's.
DEFAULT_BOOK = SHIPPED_BOOK
DEFAULT_BOOK_DEPTH = 8
MAX_BOOK_DEPTH = 40
DEFAULT_SPRT_ALPHA = 0.05
DEFAULT_SPRT_BETA = 0.05
# A chosen SPRT batch (game pairs per update): a task holds whole batches, so a
# batch far above the reference's (16 pairs at STC) makes every task that long.
MAX_SPRT_BATCH_PAIRS = 1000

EloModel = Literal["normalized", "logistic", "BayesElo"]
ELO_MODELS: tuple[EloModel, ...] = ("normalized", "logistic", "BayesElo")
Compiler = Literal["", "g++", "clang++"]
COMPILERS: tuple[Compiler, ...] = ("", "g++", "clang++")

_SIGNATURE = re.compile(r"\d{1,20}", re.ASCII)
_BOOK = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\.(epd|pgn)", re.ASCII)
_OPTION = re.compile(r"(?P<name>[^=]+)=(?P<value>.*)")


# ---------------------------------------------------------------- result types


@dataclass(frozen=True, slots=True)
class SprtArgs:
    elo0: float
    elo1: float
    alpha: float = DEFAULT_SPRT_ALPHA
    beta: float = DEFAULT_SPRT_BETA
    elo_model: EloModel = "normalized"
    # Game pairs per update; None: the reference's formula of the run's TC and threads.
    batch_size: int | None = None


@dataclass(frozen=True, slots=True)
class SpsaArgs:
    """SPSA inputs (reference 6). `A` is the submitted A *ratio*; the stored
    stability constant int(A · num_games / 2) is `schedule.big_a`."""

    A: float  # the reference's name
    alpha: float
    gamma: float
    raw_params: str
    params: tuple[SpsaParam, ...]
    schedule: SpsaSchedule


@dataclass(frozen=True, slots=True)
class RunArgs:
    """A validated run submission, named as the reference's `args`.

    `allowed_archs` is derived from `arch_filter`: the worker_arch values it
    matches (None: no filter). The filter is evaluated once here, so the
    scheduler never runs a user's regex per request.
    """

    tests_repo: str
    base_tag: str
    new_tag: str
    base_signature: str
    new_signature: str
    tc: str
    new_tc: str
    threads: int
    book: str
    book_depth: int
    base_options: str
    new_options: str
    num_games: int
    priority: float
    throughput: float
    auto_purge: bool
    adjudication: bool
    arch_filter: str
    compiler: Compiler
    info: str
    sprt: SprtArgs | None = None
    spsa: SpsaArgs | None = None
    allowed_archs: frozenset[str] | None = None

    @property
    def time_control(self) -> TimeControl:
        return parse_time_control(self.tc, "tc")

    @property
    def new_time_control(self) -> TimeControl:
        return parse_time_control(self.new_tc, "new_tc")

    def game_duration(self) -> float:
        """Estimated seconds per game; with time odds each side uses its own
        clock, so a game lasts the mean of the two estimates."""
        return (self.time_control.game_duration() + self.new_time_control.game_duration()) / 2


# ---------------------------------------------------------------- entry point


def parse_run_args(raw: Mapping[str, object], default_book: str = DEFAULT_BOOK) -> RunArgs:
    """Validate a submission; ValidationError(field, message) for the first bad field.
    `default_book` is the book of a submission that names none.

    Blocking when an arch filter is given (it is evaluated in a child process,
    see `matching_archs`): call it from the threadpool.
    """
    tests_repo = check_repo_url(read_text(raw, "tests_repo", required=True))
    base_tag = check_ref(read_text(raw, "base_tag", default="master"), "base_tag")
    new_tag = check_ref(read_text(raw, "new_tag", required=True), "new_tag")
    base_signature = _signature(raw, "base_signature")
    new_signature = _signature(raw, "new_signature")
    tc = read_text(raw, "tc", default="10+0.1")
    parse_time_control(tc, "tc")
    new_tc = read_text(raw, "new_tc") or tc
    parse_time_control(new_tc, "new_tc")
    threads = read_int(raw, "threads", 1, low=1, high=MAX_THREADS)
    book = _book(raw, default_book)
    book_depth = read_int(raw, "book_depth", DEFAULT_BOOK_DEPTH, low=1, high=MAX_BOOK_DEPTH)
    base_options = check_options(read_text(raw, "base_options"), "base_options")
    new_options = check_options(read_text(raw, "new_options"), "new_options")
    sprt_raw, spsa_raw = _stop_rule(raw)
    sprt = _sprt(sprt_raw) if sprt_raw is not None else None
    num_games = _num_games(raw, sprt=sprt is not None, spsa=spsa_raw is not None)
    if sprt is not None:
        _check_batch_fits(sprt, num_games)
    spsa = _spsa(spsa_raw, num_games) if spsa_raw is not None else None
    priority = read_float(raw, "priority", 0.0)
    throughput = read_float(raw, "throughput", 100.0, low=0.0, high=MAX_THROUGHPUT)
    auto_purge = read_bool(raw, "auto_purge", default=False)
    adjudication = read_bool(raw, "adjudication", default=True)
    arch_filter = read_text(raw, "arch_filter")
    allowed_archs = matching_archs(arch_filter) if arch_filter else None
    compiler = _compiler(raw)
    info = _info(raw)
    return RunArgs(
        tests_repo=tests_repo,
        base_tag=base_tag,
        new_tag=new_tag,
        base_signature=base_signature,
        new_signature=new_signature,
        tc=tc,
        new_tc=new_tc,
        threads=threads,
        book=book,
        book_depth=book_depth,
        base_options=base_options,
        new_options=new_options,
        num_games=num_games,
        priority=priority,
        throughput=throughput,
        auto_purge=auto_purge,
        adjudication=adjudication,
        arch_filter=arch_filter,
        compiler=compiler,
        info=info,
        sprt=sprt,
        spsa=spsa,
        allowed_archs=allowed_archs,
    )


# ---------------------------------------------------------------- field checks


def check_options(text: str, field: str) -> str:
    """Space-separated `Name=Value` UCI options, ASCII, each name at most once."""
    if len(text) > MAX_OPTIONS_CHARS:
        raise ValidationError(field, f"is longer than {MAX_OPTIONS_CHARS} characters")
    if any(not 32 <= ord(c) < 127 for c in text):
        raise ValidationError(field, "must be printable ASCII (no tabs or control characters)")
    seen: set[str] = set()
    tokens = text.split()
    for token in tokens:
        match = _OPTION.fullmatch(token)
        if match is None:
            raise ValidationError(field, f"{token!r} is not of the form Name=Value")
        name = match.group("name").lower()  # UCI option names are case-insensitive
        if name in seen:
            raise ValidationError(field, f"option {match.group('name')!r} is given twice")
        seen.add(name)
    return " ".join(tokens)


def option_value(options: str, name: str) -> str | None:
    """The value of one UCI option in a validated options string (e.g. Hash)."""
    for token in options.split():
        key, _, value = token.partition("=")
        if key.lower() == name.lower():
            return value
    return None


# ---------------------------------------------------------------- stop rules


def _stop_rule(
    raw: Mapping[str, object],
) -> tuple[Mapping[str, object] | None, Mapping[str, object] | None]:
    sprt = _section(raw, "sprt")
    spsa = _section(raw, "spsa")
    if sprt is not None and spsa is not None:
        raise ValidationError("spsa", "a run is either SPRT or SPSA, not both")
    return sprt, spsa


def _section(raw: Mapping[str, object], field: str) -> Mapping[str, object] | None:
    value = raw.get(field)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be an object of its parameters")
    return {str(key): item for key, item in value.items()}


def _sprt(raw: Mapping[str, object]) -> SprtArgs:
    elo0 = read_float(raw, "elo0", None, name="sprt.elo0")
    elo1 = read_float(raw, "elo1", None, name="sprt.elo1")
    if elo1 <= elo0:
        raise ValidationError("sprt.elo1", f"elo1 ({elo1:g}) must be greater than elo0 ({elo0:g})")
    alpha = _probability(raw, "alpha", DEFAULT_SPRT_ALPHA)
    beta = _probability(raw, "beta", DEFAULT_SPRT_BETA)
    model = read_text(raw, "elo_model", default="normalized", name="sprt.elo_model")
    batch_size = _batch_size(raw)
    for known in ELO_MODELS:
        if model == known:
            return SprtArgs(elo0, elo1, alpha, beta, known, batch_size)
    raise ValidationError("sprt.elo_model", f"must be one of {', '.join(ELO_MODELS)}")


def _batch_size(raw: Mapping[str, object]) -> int | None:
    """A chosen batch in game pairs (a short test may want frequent updates), or None."""
    if raw.get("batch_size") in (None, ""):
        return None
    high = MAX_SPRT_BATCH_PAIRS
    return read_int(raw, "batch_size", 1, low=1, high=high, name="sprt.batch_size")


def _check_batch_fits(sprt: SprtArgs, num_games: int) -> None:
    """A batch longer than the run's game cap would never update the SPRT."""
    if sprt.batch_size is not None and 2 * sprt.batch_size > num_games:
        raise ValidationError(
            "sprt.batch_size",
            f"{sprt.batch_size} game pairs is more than num_games ({num_games:,} games) allows",
        )


def _probability(raw: Mapping[str, object], key: str, default: float) -> float:
    value = read_float(raw, key, default, name=f"sprt.{key}")
    if not 0.0 < value < 0.5:
        raise ValidationError(f"sprt.{key}", f"must be between 0 and 0.5, got {value:g}")
    return value


def _spsa(raw: Mapping[str, object], num_games: int) -> SpsaArgs:
    a_ratio = read_float(raw, "A", DEFAULT_A_RATIO, low=0.0, name="spsa.A")
    alpha = read_float(raw, "alpha", DEFAULT_ALPHA, name="spsa.alpha")
    gamma = read_float(raw, "gamma", DEFAULT_GAMMA, name="spsa.gamma")
    for key, value in (("alpha", alpha), ("gamma", gamma)):
        if not 0.0 <= value <= 1.0:  # 0: constant gains, as Autoselect chooses
            raise ValidationError(f"spsa.{key}", f"must be in [0, 1], got {value:g}")
    text = read_text(raw, "raw_params", name="spsa.raw_params", keep_lines=True)
    schedule = make_schedule(num_games, a_ratio, alpha, gamma)
    try:
        params = parse_params(text, schedule)
    except SpsaParseError as error:
        raise ValidationError("spsa.raw_params", str(error)) from None
    return SpsaArgs(a_ratio, alpha, gamma, text.strip(), tuple(params), schedule)


def _num_games(raw: Mapping[str, object], *, sprt: bool, spsa: bool) -> int:
    default = SPRT_DEFAULT_GAMES if sprt else DEFAULT_GAMES
    games = read_int(raw, "num_games", default, low=1, high=MAX_GAMES)
    if spsa and games % SPSA_GAMES_STEP:
        raise ValidationError("num_games", "an SPSA run needs a multiple of 1000 games")
    if games % 2:
        raise ValidationError("num_games", f"must be even (games are played in pairs), got {games}")
    return games


# ---------------------------------------------------------------- small fields


def _signature(raw: Mapping[str, object], field: str) -> str:
    text = read_text(raw, field)
    if text and _SIGNATURE.fullmatch(text) is None:
        raise ValidationError(field, "must be the bench node count (digits only) or empty")
    return text


def _book(raw: Mapping[str, object], default: str) -> str:
    book = read_text(raw, "book", default=default)
    if len(book) > 128 or _BOOK.fullmatch(book) is None:
        raise ValidationError("book", "must be a file name ending in .epd or .pgn (no folders)")
    return book


def _compiler(raw: Mapping[str, object]) -> Compiler:
    value = read_text(raw, "compiler")
    for known in COMPILERS:
        if value == known:
            return known
    raise ValidationError("compiler", "must be g++, clang++ or empty (any compiler)")


def _info(raw: Mapping[str, object]) -> str:
    info = read_text(raw, "info", keep_lines=True).strip()
    if len(info) > MAX_INFO_CHARS:
        raise ValidationError("info", f"is longer than {MAX_INFO_CHARS:,} characters")
    return info


# ---------------------------------------------------------------- value readers
