"""The worker's configuration: an INI file in its data directory, plus flags.

Flags given once are written to the file, so the next start needs none
(`arbiter worker` alone). The file holds the password or token, so it is
created readable by its owner only. A token may instead come from a file of
its own (`--token-file`, whose path is saved) or from ARBITER_WORKER_TOKEN
(never saved), so it is not seen in the process list. `resolve` turns the file's text into one
frozen `WorkerConfig`, or a ConfigError naming the setting to fix.
"""

import configparser
import os
import random
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from arbiter.protocol.messages import USERNAME_PATTERN
from arbiter.protocol.packages import PUBLIC_KEY_BYTES, decode_key
from arbiter.stats.scheduling import max_concurrency_for_memory
from arbiter.worker.arguments import (
    CONFIG_NAME,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_MEMORY,
    TOKEN_VARIABLE,
)
from arbiter.worker.arguments import DEFAULT_DATA_DIR as DEFAULT_DATA_DIR_NAME
from arbiter.worker.errors import ConfigError
from arbiter.worker.expressions import evaluate
from arbiter.worker.host import Machine, hardware_prefix

DEFAULT_DATA_DIR = Path(DEFAULT_DATA_DIR_NAME)
HARDWARE_PREFIX = "_hw"  # derive the uuid prefix from the machine
COMPILERS = ("", "g++", "clang++")

_PREFIX = re.compile(r"[0-9a-zA-Z]{2,8}")

# (section, key, default) of every setting the file keeps.
SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("login", "username", ""),
    ("login", "password", ""),
    ("login", "token_file", ""),
    ("parameters", "server", ""),
    ("parameters", "concurrency", DEFAULT_CONCURRENCY),
    ("parameters", "max_memory", DEFAULT_MAX_MEMORY),
    ("parameters", "min_threads", "1"),
    ("parameters", "uuid_prefix", HARDWARE_PREFIX),
    ("parameters", "fleet", "false"),
    ("parameters", "compiler", ""),
    ("parameters", "self_update", "true"),
    ("parameters", "server_key", ""),
    ("parameters", "allow_http_updates", "false"),
    ("private", "hw_seed", ""),
)
KEY_SECTIONS = {key: section for section, key, _ in SETTINGS}


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    server: str  # base URL, no trailing slash
    username: str
    password: str  # an account password or a worker token: both travel as `password`
    concurrency: int  # cores the worker may use, after the memory clamp
    max_memory: int  # MiB
    min_threads: int
    uuid_prefix: str  # 2-8 alphanumerics: the stable first group of unique_key
    fleet: bool  # exit when the server has no work instead of waiting
    compiler: str  # "g++", "clang++", or "" for the first usable one
    data_dir: Path
    self_update: bool = True  # install the server's newer worker (update.py)
    server_key: str = ""  # the package signing key to trust; "": the first one announced
    allow_http_updates: bool = False  # self-update over plain http from another machine

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_NAME


def read_file(path: Path) -> configparser.ConfigParser:
    """The stored settings with a default for every missing one."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as error:
        raise ConfigError(f"{path}: not a valid configuration file ({error})") from None
    for section, key, default in SETTINGS:
        if not parser.has_section(section):
            parser.add_section(section)
        if not parser.has_option(section, key):
            parser.set(section, key, default)
    if not parser.get("private", "hw_seed"):
        parser.set("private", "hw_seed", str(random.SystemRandom().getrandbits(32)))
    return parser


def apply_flags(parser: configparser.ConfigParser, flags: Mapping[str, str | None]) -> None:
    """Store every given flag (None: not given) under its setting name."""
    for key, value in flags.items():
        if value is not None:
            parser.set(KEY_SECTIONS[key], key, value)


def write_file(path: Path, parser: configparser.ConfigParser) -> None:
    """Write atomically, owner-only: the file holds a credential."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as sink:
        parser.write(sink)
    temporary.replace(path)


def resolve(
    parser: configparser.ConfigParser, machine: Machine, data_dir: Path, *, env_token: str = ""
) -> tuple[WorkerConfig, list[str]]:
    """The configuration to run with, and notes worth logging (a clamped concurrency).
    `env_token`: a token from the environment, used instead of the saved credential."""
    get = parser.get
    username = get("login", "username").strip()
    if not re.fullmatch(USERNAME_PATTERN, username):
        raise ConfigError("username: give --username (letters and digits, at least 2)")
    password = _credential(parser, env_token)
    notes: list[str] = []
    concurrency = _concurrency(get("parameters", "concurrency"), machine.cpus)
    max_memory = _max_memory(get("parameters", "max_memory"), machine.memory_mib)
    allowed = max_concurrency_for_memory(max_memory)
    if allowed < 1:
        raise ConfigError(f"max_memory: {max_memory} MiB is too little for even one game")
    if concurrency > allowed:
        notes.append(f"concurrency reduced from {concurrency} to {allowed} by max_memory")
        concurrency = allowed
    config = WorkerConfig(
        server=_server(get("parameters", "server")),
        username=username,
        password=password,
        concurrency=concurrency,
        max_memory=max_memory,
        min_threads=_positive(get("parameters", "min_threads"), "min_threads"),
        uuid_prefix=_uuid_prefix(parser, machine, data_dir),
        fleet=_boolean(parser, "fleet"),
        compiler=_compiler(get("parameters", "compiler")),
        data_dir=data_dir,
        self_update=_boolean(parser, "self_update"),
        server_key=_server_key(get("parameters", "server_key")),
        allow_http_updates=_boolean(parser, "allow_http_updates"),
    )
    return config, notes


def _server_key(text: str) -> str:
    text = text.strip()
    if text and decode_key(text, PUBLIC_KEY_BYTES) is None:
        raise ConfigError(
            "server_key: not an Ed25519 public key (44 characters of base64, as "
            "`arbiter signing-key` prints it on the server)"
        )
    return text


def _credential(parser: configparser.ConfigParser, env_token: str) -> str:
    """The secret sent as `password`: the environment's token, else the token
    file's, else the saved password or token."""
    if env_token.strip():
        return env_token.strip()
    token_file = parser.get("login", "token_file").strip()
    if token_file:
        return read_token_file(Path(token_file))
    password = parser.get("login", "password")
    if not password:
        raise ConfigError(
            f"password: give --password, --token or --token-file, or set {TOKEN_VARIABLE}"
        )
    return password


def read_token_file(path: Path) -> str:
    """The token in `path`, refused when others may read or change the file."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"token_file: {path} has mode {mode:04o}, so other users can read it;"
                f" it must be 0600 or stricter (chmod 600 {path})"
            )
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise ConfigError(f"token_file: cannot read {path}: {reason}") from None
    if not token:
        raise ConfigError(f"token_file: {path} is empty")
    return token


def _server(text: str) -> str:
    url = text.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("server: give --server http(s)://host[:port] of the Arbiter server")
    return url


def _concurrency(text: str, cpus: int) -> int:
    value = int(evaluate(text, {"MAX": cpus}, "concurrency"))
    if value < 1:
        raise ConfigError(f"concurrency: {text!r} gives {value}; at least 1 core is needed")
    if value > cpus:
        raise ConfigError(f"concurrency: {text!r} gives {value} but this machine has {cpus} cores")
    if value == cpus and cpus > 1 and "MAX" not in text:
        # Using every core starves the OS and skews timing; it must be meant.
        raise ConfigError("concurrency: to use every core, write MAX (e.g. --concurrency MAX)")
    return value


def _max_memory(text: str, memory: int) -> int:
    value = int(evaluate(text, {"MAX": memory}, "max_memory"))
    if not 0 <= value <= memory:
        raise ConfigError(f"max_memory: {text!r} gives {value} MiB; this machine has {memory}")
    return value


def _positive(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a whole number") from None
    if value < 1:
        raise ConfigError(f"{name}: must be at least 1")
    return value


def _uuid_prefix(parser: configparser.ConfigParser, machine: Machine, data_dir: Path) -> str:
    text = parser.get("parameters", "uuid_prefix").strip()
    if text == HARDWARE_PREFIX:
        seed_text = parser.get("private", "hw_seed").strip()
        if not (seed_text.isascii() and seed_text.isdigit()):
            raise ConfigError(f"hw_seed: {seed_text!r} must be a whole number (or delete it)")
        return hardware_prefix(int(seed_text), machine.machine_id, data_dir)
    if not _PREFIX.fullmatch(text):
        raise ConfigError(f"uuid_prefix: {text!r} must be 2 to 8 letters or digits, or _hw")
    return text


def _boolean(parser: configparser.ConfigParser, key: str) -> bool:
    try:
        return parser.getboolean(KEY_SECTIONS[key], key)
    except ValueError:
        raise ConfigError(f"{key}: must be true or false") from None


def _compiler(text: str) -> str:
    value = text.strip()
    if value not in COMPILERS:
        raise ConfigError(f"compiler: {value!r} must be g++ or clang++")
    return value
