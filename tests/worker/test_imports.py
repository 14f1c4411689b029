"""The worker installs without the server's dependencies (worker/pyproject.toml):
none of its modules, nor the `arbiter` command's parser, may import them."""

import pkgutil
import subprocess
import sys

import arbiter.worker

SERVER_ONLY = ("starlette", "uvicorn", "sqlalchemy", "alembic", "psycopg", "argon2", "jinja2",
               "zxcvbn", "itsdangerous", "multipart", "anyio", "uvloop", "httptools")  # fmt: skip

PROBE = """
import importlib, sys
blocked = set(sys.argv[1].split(","))

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"server dependency imported: {name}")
        return None

sys.meta_path.insert(0, Block())
for module in sys.argv[2].split(","):
    importlib.import_module(module)
from arbiter.cli import build_parser
build_parser().parse_args(["worker", "--help"])
"""


def test_worker_modules_import_without_server_dependencies() -> None:
    modules = [
        info.name for info in pkgutil.walk_packages(arbiter.worker.__path__, "arbiter.worker.")
    ]
    assert "arbiter.worker.match.runner" in modules
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(SERVER_ONLY), ",".join(modules)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--uuid-prefix" in done.stdout
