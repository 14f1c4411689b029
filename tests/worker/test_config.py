"""The configuration file and flags: merged, saved, resolved and checked."""

import stat
from pathlib import Path

import pytest

from arbiter.worker.config import WorkerConfig, apply_flags, read_file, resolve, write_file
from arbiter.worker.errors import ConfigError
from arbiter.worker.host import Machine

MACHINE = Machine(cpus=8, memory_mib=16384, machine_id="abc")
GOOD = {"username": "alice", "password": "secret", "server": "http://127.0.0.1:8000/"}


def configured(tmp_path: Path, **flags: str) -> tuple[WorkerConfig, list[str]]:
    parser = read_file(tmp_path / "worker.ini")
    apply_flags(parser, {**GOOD, **flags})
    return resolve(parser, MACHINE, tmp_path)


def test_defaults(tmp_path: Path) -> None:
    parser = read_file(tmp_path / "worker.ini")
    apply_flags(parser, GOOD)
    config, notes = resolve(parser, MACHINE, tmp_path)
    assert config.server == "http://127.0.0.1:8000"
    assert (config.concurrency, config.max_memory, config.min_threads) == (3, 8192, 1)
    assert config.fleet is False
    assert config.self_update is True
    assert (config.server_key, config.allow_http_updates) == ("", False)
    assert config.compiler == ""
    assert len(config.uuid_prefix) == 8
    assert notes == []


def test_flags_are_saved_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "worker.ini"
    parser = read_file(path)
    apply_flags(parser, {**GOOD, "concurrency": "MAX", "fleet": "true", "uuid_prefix": "box1"})
    write_file(path, parser)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the password
    again = read_file(path)
    apply_flags(again, {"username": None, "min_threads": "2"})
    config, _ = resolve(again, MACHINE, tmp_path)
    assert (config.username, config.password) == ("alice", "secret")
    assert (config.concurrency, config.fleet, config.uuid_prefix, config.min_threads) == (
        8,
        True,
        "box1",
        2,
    )


def test_the_hardware_prefix_is_stable_per_directory(tmp_path: Path) -> None:
    path = tmp_path / "worker.ini"
    parser = read_file(path)
    apply_flags(parser, GOOD)
    write_file(path, parser)
    first, _ = resolve(read_file(path), MACHINE, tmp_path)
    second, _ = resolve(read_file(path), MACHINE, tmp_path)
    other, _ = resolve(read_file(path), MACHINE, tmp_path / "elsewhere")
    assert first.uuid_prefix == second.uuid_prefix != other.uuid_prefix


def test_memory_clamps_concurrency(tmp_path: Path) -> None:
    config, notes = configured(tmp_path, concurrency="6", max_memory="1300")
    assert config.concurrency == 2  # (1300 - 444) // 396
    assert notes == ["concurrency reduced from 6 to 2 by max_memory"]


def test_self_update_is_turned_off_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "worker.ini"
    write_file(path, read_file(path))
    text = path.read_text()
    assert "self_update = true" in text  # written out, so an operator finds it
    path.write_text(text.replace("self_update = true", "self_update = false"))
    parser = read_file(path)
    apply_flags(parser, GOOD)
    config, _ = resolve(parser, MACHINE, tmp_path)
    assert config.self_update is False


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"username": ""}, "username"),
        ({"username": "a-b"}, "username"),
        ({"password": ""}, "password"),
        ({"server": "ftp://x"}, "server"),
        ({"server": ""}, "server"),
        ({"concurrency": "0"}, "at least 1"),
        ({"concurrency": "9"}, "8 cores"),
        ({"concurrency": "8"}, "write MAX"),
        ({"max_memory": "MAX*2"}, "max_memory"),
        ({"max_memory": "800"}, "too little"),
        ({"min_threads": "zero"}, "min_threads"),
        ({"uuid_prefix": "a"}, "uuid_prefix"),
        ({"uuid_prefix": "bad-prefix"}, "uuid_prefix"),
        ({"fleet": "perhaps"}, "fleet"),
        ({"self_update": "sometimes"}, "self_update"),
        ({"compiler": "icc"}, "compiler"),
        ({"server_key": "not base64!"}, "server_key"),
        ({"server_key": "AAAA"}, "server_key"),  # base64, but not 32 bytes
        ({"allow_http_updates": "maybe"}, "allow_http_updates"),
    ],
)
def test_bad_values_name_the_setting(tmp_path: Path, flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        configured(tmp_path, **flags)


def test_a_broken_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "worker.ini").write_text("this is not [ini")
    with pytest.raises(ConfigError, match="not a valid configuration file"):
        read_file(tmp_path / "worker.ini")


def token_file(tmp_path: Path, text: str = "arb_from-a-file\n", mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_token_file_is_read_when_only_its_owner_can(tmp_path: Path, mode: int) -> None:
    path = token_file(tmp_path, mode=mode)
    config, _ = configured(tmp_path, password="", token_file=str(path))
    assert config.password == "arb_from-a-file"  # without the newline


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = token_file(tmp_path, mode=mode)
    with pytest.raises(ConfigError, match=f"mode {mode:04o}.*0600 or stricter.*chmod 600"):
        configured(tmp_path, token_file=str(path))


def test_a_missing_or_empty_token_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"token_file: cannot read .*missing"):
        configured(tmp_path, token_file=str(tmp_path / "missing"))
    empty = token_file(tmp_path, text="\n")
    with pytest.raises(ConfigError, match=r"token_file: .* is empty"):
        configured(tmp_path, token_file=str(empty))


def test_a_token_from_the_environment_comes_before_the_saved_credentials(tmp_path: Path) -> None:
    path = token_file(tmp_path)
    parser = read_file(tmp_path / "worker.ini")
    apply_flags(parser, {**GOOD, "token_file": str(path)})
    config, _ = resolve(parser, MACHINE, tmp_path, env_token=" arb_from-env\n")
    assert config.password == "arb_from-env"
    config, _ = resolve(parser, MACHINE, tmp_path)  # the file, then the saved password
    assert config.password == "arb_from-a-file"


def test_without_any_credential_every_way_to_give_one_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        configured(tmp_path, password="")
    for way in ("--password", "--token", "--token-file", "ARBITER_WORKER_TOKEN"):
        assert way in str(raised.value)


def test_the_owner_may_set_the_servers_key_and_allow_http_updates(tmp_path: Path) -> None:
    key = "GH3U9avovIgkcVpQ3/dnIU1XsxQHEAq/8m1yYf9DnDk="
    config, _ = configured(tmp_path, server_key=f" {key} ", allow_http_updates="true")
    assert (config.server_key, config.allow_http_updates) == (key, True)
