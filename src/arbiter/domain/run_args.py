"""Validation of a run submission into `RunArgs` (reference 3.1, 6 and 8).

Pure: no storage, no network. `parse_run_args` takes the submitted values (a
form's strings or a script's JSON values) and raises `ValidationError` for the
first bad field, in the order of the submission form, with a message the test
author can act on. Resolving the tags to SHAs is `arbiter.domain.repos`'s job.

Field names are the reference's; nested stop-rule fields are named
`sprt.<name>` / `spsa.<name>` in errors. Keys that are not run arguments are
ignored (a form also posts its CSRF token).
"""

import math
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from arbiter.domain.errors import ValidationError
from arbiter.protocol.books import SHIPPED_BOOK
from arbiter.protocol.messages import SUPPORTED_ARCHS, WORKER_ARCHS
from arbiter.stats.scheduling import REFERENCE_NPS, game_duration
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
MAX_REPO_CHARS = 500
MAX_REF_CHARS = 255
MAX_ARCH_FILTER_CHARS = 200
MAX_NODES = 10**10
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
# Evaluating an arch filter runs in a child process with this time limit (s).
ARCH_FILTER_TIMEOUT = 2.0

EloModel = Literal["normalized", "logistic", "BayesElo"]
ELO_MODELS: tuple[EloModel, ...] = ("normalized", "logistic", "BayesElo")
Compiler = Literal["", "g++", "clang++"]
COMPILERS: tuple[Compiler, ...] = ("", "g++", "clang++")
REPO_SCHEMES = ("https", "http", "ssh", "git", "file")

_TIME_TC = re.compile(r"([1-9]\d*/)?\d+(\.\d+)?(\+\d+(\.\d+)?)?", re.ASCII)
_NODES_TC = re.compile(r"N=([1-9]\d*)", re.ASCII)
_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}", re.ASCII)
_SHORT_SHA = re.compile(r"[0-9a-fA-F]{7,39}", re.ASCII)
_SIGNATURE = re.compile(r"\d{1,20}", re.ASCII)
_BOOK = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\.(epd|pgn)", re.ASCII)
_OPTION = re.compile(r"(?P<name>[^=]+)=(?P<value>.*)")
_SCP_LIKE = re.compile(
    r"(?P<user>[A-Za-z0-9_][A-Za-z0-9._-]*)@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):.+"
)
# Characters git forbids anywhere in a ref name (git check-ref-format, rules 4, 5, 10).
_INT_TEXT = re.compile(r"\s*[+-]?\d{1,12}\s*", re.ASCII)
_REF_FORBIDDEN = frozenset(" ~^:?*[\\")


# ---------------------------------------------------------------- time controls


@dataclass(frozen=True, slots=True)
class TimeControl:
    """A parsed `tc`: `[moves/]seconds[+increment]`, or `N=<nodes>` per move.

    `moves` is None for a whole-game clock; `nodes` is None for a clock.
    """

    moves: int | None
    seconds: float
    increment: float
    nodes: int | None = None

    def game_duration(self) -> float:
        """Estimated seconds per game (reference 4.5).

        Clock: (time + 68·inc, a moves/time clock scaled by 68/moves) × 2 × 0.92.
        Fixed nodes: we price a move like an increment of nodes / 628,000 s,
        the reference speed workers are calibrated against (stats.scheduling);
        that keeps node-limited runs comparable with clock runs when tasks are
        sized. The Python match runner's per-move overhead is not counted.
        """
        return game_duration(self.scheduling_tc())

    def scheduling_tc(self) -> str:
        """A clock string with the same duration estimate, for the stats
        scheduling functions (which take `[moves/]time[+inc]` strings)."""
        if self.nodes is not None:
            return f"0+{_plain(self.nodes / REFERENCE_NPS)}"
        text = f"{_plain(self.seconds)}+{_plain(self.increment)}"
        return f"{self.moves}/{text}" if self.moves else text


def _plain(value: float) -> str:
    # Never an exponent ("1e+06" is no time control); microseconds suffice.
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def parse_time_control(text: str, field: str = "tc") -> TimeControl:
    """Parse a time control; ValidationError(field, ...) when it is not one."""
    nodes = _NODES_TC.fullmatch(text)
    if nodes is not None:
        count = int(nodes.group(1))
        if count > MAX_NODES:
            raise ValidationError(field, f"at most {MAX_NODES:,} nodes per move")
        return TimeControl(None, 0.0, 0.0, count)
    if _TIME_TC.fullmatch(text) is None:
        raise ValidationError(
            field,
            f"{text!r} is not a time control: write [moves/]seconds[+increment] "
            "(e.g. 10+0.1, 40/20) or N=<nodes per move> (e.g. N=25000)",
        )
    head, _, inc = text.partition("+")
    moves, _, seconds = head.rpartition("/")
    parsed = TimeControl(int(moves) if moves else None, float(seconds), float(inc or 0))
    if parsed.seconds == 0 and parsed.increment == 0:
        raise ValidationError(field, f"{text!r} gives the engines no time at all")
    return parsed


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


def check_repo_url(url: str, field: str = "tests_repo") -> str:
    """A git URL we are willing to hand to `git` (here and on every worker).

    Accepted: https, http, ssh, git and file URLs, and scp-like user@host:path.
    Refused: other transports (git's `ext::` runs commands), whitespace and
    control characters, a leading '-' (it would be read as an option), and
    passwords in the URL (run arguments are public).
    """
    usage = "must be a git URL (https://, http://, ssh://, git://, file://) or user@host:path"
    if not url:
        raise ValidationError(field, f"is required: it {usage}")
    if len(url) > MAX_REPO_CHARS:
        raise ValidationError(field, f"is longer than {MAX_REPO_CHARS} characters")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError(field, "must not contain spaces or control characters")
    if url.startswith("-"):
        raise ValidationError(field, "must not start with '-'")
    if "://" not in url:
        if _SCP_LIKE.fullmatch(url) is None:
            raise ValidationError(field, usage)
        return url
    return _check_url(url, field, usage)


def _check_url(url: str, field: str, usage: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        password = parts.password
    except ValueError:
        raise ValidationError(field, usage) from None
    if parts.scheme.lower() not in REPO_SCHEMES:
        raise ValidationError(field, usage)
    if password is not None:
        raise ValidationError(field, "must not contain a password: run arguments are public")
    if parts.scheme.lower() != "file" and (not host or host.startswith("-")):
        raise ValidationError(field, "needs a host name")
    if parts.path.strip("/") == "":
        raise ValidationError(field, "needs a repository path")
    return url


def is_full_sha(text: str) -> bool:
    return _FULL_SHA.fullmatch(text) is not None


def is_short_sha(text: str) -> bool:
    return _SHORT_SHA.fullmatch(text) is not None


def check_ref(ref: str, field: str) -> str:
    """A branch or tag name by `git check-ref-format` rules, or a 7-40 hex SHA."""
    if not ref:
        raise ValidationError(field, "is required: give a branch, a tag or a commit SHA")
    if is_full_sha(ref) or is_short_sha(ref):
        return ref
    problem = _ref_problem(ref)
    if problem is not None:
        raise ValidationError(field, f"{ref!r} is not a valid branch or tag name: {problem}")
    return ref


# git check-ref-format's rules (onelevel names allowed, as for a branch), each
# with the explanation a user sees; plus a leading '-', which git would read
# as an option.
_REF_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda ref: len(ref) > MAX_REF_CHARS, f"longer than {MAX_REF_CHARS} characters"),
    (lambda ref: ref.startswith("-"), "it starts with '-'"),
    (
        lambda ref: any(ord(c) < 0x20 or ord(c) == 0x7F or c in _REF_FORBIDDEN for c in ref),
        "spaces, control characters and ~ ^ : ? * [ \\ are not allowed",
    ),
    (lambda ref: ref == "@" or "@{" in ref, "'@' alone and '@{' are not allowed"),
    (lambda ref: ".." in ref, "'..' is not allowed"),
    (
        lambda ref: ref.startswith("/") or ref.endswith("/") or "//" in ref,
        "empty path components are not allowed",
    ),
    (lambda ref: ref.endswith("."), "it ends with '.'"),
    (
        lambda ref: any(p.startswith(".") or p.endswith(".lock") for p in ref.split("/")),
        "a component starts with '.' or ends with '.lock'",
    ),
)


def _ref_problem(ref: str) -> str | None:
    for broken, explanation in _REF_RULES:
        if broken(ref):
            return explanation
    return None


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


def matching_archs(arch_filter: str, field: str = "arch_filter") -> frozenset[str]:
    """The worker_arch values an arch filter matches (`re.search`, as the reference).

    The regex is compiled here (length-capped) for a clear syntax error, then
    evaluated in a child process with a time limit: Python's `re` cannot be
    interrupted, and a pattern like `(.*.*.*)*!` backtracks for minutes even
    on these short names. Blocking (a process start): call it from the
    threadpool, like the rest of run validation.
    """
    if len(arch_filter) > MAX_ARCH_FILTER_CHARS:
        raise ValidationError(field, f"is longer than {MAX_ARCH_FILTER_CHARS} characters")
    try:
        re.compile(arch_filter)
    except (re.error, OverflowError, RecursionError, ValueError) as error:
        raise ValidationError(field, f"is not a valid regular expression: {error}") from None
    matched = _search_in_child(arch_filter, field)
    if not matched & set(SUPPORTED_ARCHS):
        raise ValidationError(field, "matches none of the supported architectures")
    return matched


_SEARCH_SCRIPT = (
    "import re, sys\n"
    "pattern, *names = sys.stdin.read().split('\\0')\n"
    "print('\\0'.join(n for n in names if re.search(pattern, n)), end='')\n"
)


def _search_in_child(pattern: str, field: str) -> frozenset[str]:
    # -I: isolated (no user site, no PYTHON* variables); the pattern travels on
    # stdin, never through a shell or argv.
    payload = "\0".join((pattern, *WORKER_ARCHS))
    try:
        done = subprocess.run(  # noqa: S603 (fixed argument list, our own interpreter)
            [sys.executable, "-I", "-c", _SEARCH_SCRIPT],
            input=payload,
            capture_output=True,
            text=True,
            timeout=ARCH_FILTER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ValidationError(field, "takes too long to evaluate: simplify it") from None
    if done.returncode != 0:
        raise ValidationError(field, "could not be evaluated: simplify it")
    return frozenset(name for name in done.stdout.split("\0") if name)


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
        if not 0.0 < value <= 1.0:
            raise ValidationError(f"spsa.{key}", f"must be in (0, 1], got {value:g}")
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
# Values come from forms (strings) or JSON (typed); both are accepted, and a
# bool is never taken for a number (True is an int in Python).


def read_text(
    raw: Mapping[str, object],
    key: str,
    *,
    default: str = "",
    required: bool = False,
    name: str | None = None,
    keep_lines: bool = False,
) -> str:
    field = name or key
    value = raw.get(key)
    if value is None or value == "":
        if required:
            raise ValidationError(field, "is required")
        return default
    if not isinstance(value, str):
        raise ValidationError(field, "must be text")
    allowed = "\t\n\r" if keep_lines else ""
    if not keep_lines:
        value = value.strip()  # a pasted value often brings a newline along
    # NUL and friends: PostgreSQL refuses NUL in text, and nobody means them.
    if any(ord(c) < 32 and c not in allowed for c in value) or "\x7f" in value:
        raise ValidationError(field, "must not contain control characters")
    return value


def read_int(
    raw: Mapping[str, object],
    key: str,
    default: int,
    *,
    low: int,
    high: int,
    name: str | None = None,
) -> int:
    field = name or key
    value = raw.get(key)
    if value is None or value == "":
        number = default
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT_TEXT.fullmatch(value):
        number = int(value)
    else:
        raise ValidationError(field, "must be a whole number")
    if not low <= number <= high:
        raise ValidationError(field, f"must be between {low:,} and {high:,}, got {number:,}")
    return number


def read_float(
    raw: Mapping[str, object],
    key: str,
    default: float | None,
    *,
    low: float | None = None,
    high: float | None = None,
    name: str | None = None,
) -> float:
    field = name or key
    value = raw.get(key)
    if value is None or value == "":
        if default is None:
            raise ValidationError(field, "is required")
        number = default
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ValidationError(field, "must be a number") from None
    else:
        raise ValidationError(field, "must be a number")
    if not math.isfinite(number):
        raise ValidationError(field, "must be a finite number")
    if low is not None and number < low:
        raise ValidationError(field, f"must be at least {low:g}, got {number:g}")
    if high is not None and number > high:
        raise ValidationError(field, f"must be at most {high:g}, got {number:g}")
    return number


_TRUE = frozenset({"true", "1", "on", "yes"})
_FALSE = frozenset({"false", "0", "off", "no"})


def read_bool(raw: Mapping[str, object], key: str, *, default: bool) -> bool:
    value = raw.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValidationError(key, "must be true or false")
