"""The `arbiter` command, run as a real subprocess on a real SQLite file."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ARBITER = [sys.executable, "-m", "arbiter"]
PASSWORD = "correct horse battery staple 1729\n"


def arbiter(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "ARBITER_ARGON2_TIME_COST": "1",
        "ARBITER_ARGON2_MEMORY_KIB": "8",
    }
    return subprocess.run(
        [*ARBITER, *args], input=stdin, capture_output=True, text=True, env=env, check=False
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "data")


def test_db_upgrade_creates_the_database(data_dir: str) -> None:
    result = arbiter("db", "upgrade", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    assert (Path(data_dir) / "arbiter.sqlite3").exists()
    assert arbiter("db", "upgrade", "--data-dir", data_dir).returncode == 0


def test_users_create_token_and_list(data_dir: str) -> None:
    created = arbiter(
        "users",
        "create",
        "alice",
        "--approver",
        "--email",
        "a@example.org",
        "--password-stdin",
        "--data-dir",
        data_dir,
        stdin=PASSWORD,
    )
    assert created.returncode == 0, created.stderr
    token = arbiter("users", "token", "alice", "--label", "box1", "--data-dir", data_dir)
    assert token.returncode == 0, token.stderr
    assert token.stdout.strip().startswith("arb_")
    assert len(token.stdout.strip()) > 40
    listing = arbiter("users", "list", "--data-dir", data_dir)
    assert listing.stdout.split("\t")[:3] == ["alice", "active", "approver"]


def test_weak_password_is_refused_with_a_message(data_dir: str) -> None:
    result = arbiter(
        "users", "create", "bob", "--password-stdin", "--data-dir", data_dir, stdin="bob\n"
    )
    assert result.returncode == 1
    assert result.stderr.startswith("arbiter: ")
    assert "Traceback" not in result.stderr


def test_duplicate_user_is_refused(data_dir: str) -> None:
    args = ("users", "create", "carol", "--password-stdin", "--data-dir", data_dir)
    assert arbiter(*args, stdin=PASSWORD).returncode == 0
    again = arbiter(*args, stdin=PASSWORD)
    assert again.returncode == 1
    assert "Traceback" not in again.stderr


def test_token_for_unknown_user_is_an_error(data_dir: str) -> None:
    result = arbiter("users", "token", "nobody", "--data-dir", data_dir)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr


def test_password_stdin_is_required(data_dir: str) -> None:
    result = arbiter("users", "create", "dave", "--data-dir", data_dir)
    assert result.returncode == 2


def test_books_import_catalogue_then_list(data_dir: str, tmp_path: Path) -> None:
    sri = "A" * 64
    entry = {"total": 5, "white": 3, "black": 2, "min_depth": None, "max_depth": None, "sri": sri}
    catalogue = tmp_path / "books.json"
    catalogue.write_text(json.dumps({"tiny.epd": entry}))
    imported = arbiter("books", "import-catalogue", str(catalogue), "--data-dir", data_dir)
    assert imported.returncode == 0, imported.stderr
    assert "1 books" in imported.stderr
    listed = arbiter("books", "list", "--data-dir", data_dir).stdout.splitlines()
    assert f"tiny.epd\tcatalogue\t5\t{sri}" in listed
    assert not any("UHO_Lichess" in line for line in listed)  # replaced, not merged


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read"),
        ("[]", "expected a JSON object"),
        ('{"a.epd": {"total": 1}}', "a.epd: white"),
    ],
)
def test_a_bad_catalogue_is_one_line_and_changes_nothing(
    data_dir: str, tmp_path: Path, content: str, message: str
) -> None:
    catalogue = tmp_path / "books.json"
    catalogue.write_text(content)
    result = arbiter("books", "import-catalogue", str(catalogue), "--data-dir", data_dir)
    assert result.returncode == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    listed = arbiter("books", "list", "--data-dir", data_dir).stdout
    assert "UHO_Lichess_4852_v1.epd\tcatalogue" in listed  # still the shipped catalogue


WORKER_DISTRIBUTION = (
    "__init__.py",
    "__main__.py",
    "cli.py",
    "py.typed",
    "protocol",
    "stats",
    "worker",
)  # fmt: skip  (worker/pyproject.toml's force-include)


def test_the_worker_distribution_offers_only_the_worker(tmp_path: Path) -> None:
    """Laid out as `pip install ./worker` lays it out, `arbiter` lists only the
    commands that can run there: the server's would end in an import error."""
    source = Path(__file__).resolve().parents[1] / "src" / "arbiter"
    package = tmp_path / "arbiter"
    package.mkdir()
    for name in WORKER_DISTRIBUTION:
        if (source / name).is_dir():
            shutil.copytree(source / name, package / name)
        else:
            shutil.copy(source / name, package / name)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*ARBITER, *args], capture_output=True, text=True, env=env, check=False, cwd=tmp_path
        )

    listed = run("--help")
    assert listed.returncode == 0, listed.stderr
    assert "volunteer worker" in listed.stdout
    assert "    worker " in listed.stdout
    assert "  serve " not in listed.stdout
    refused = run("serve")
    assert refused.returncode == 2
    assert "invalid choice: 'serve'" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "--uuid-prefix" in run("worker", "--help").stdout
