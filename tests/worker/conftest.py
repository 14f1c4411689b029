"""Session fixtures of the worker's end-to-end tests: a data directory with
accounts and tokens made once (copied for each test's server), and the
sample engine repository with an extra branch that does not build."""

import pytest

from arbiter.worker.sample_engine import SampleRepo, commit, git, make_sample_repo
from tests.web.live_server import create_token, create_user
from tests.worker.e2e import Accounts
from tests.worker.support import STOCKFISH, needs_stockfish

BROKEN_MAKEFILE = (
    "build:\n\t@echo 'src/search.cpp:42: error: deliberate build failure' >&2\n\t@false\n"
)


@pytest.fixture(scope="session")
def accounts(tmp_path_factory: pytest.TempPathFactory) -> Accounts:
    """alice submits and runs workers; root approves."""
    data = tmp_path_factory.mktemp("accounts") / "data"
    create_user(data, "alice")
    create_user(data, "root", approver=True)
    return Accounts(data, create_token(data, "alice"), create_token(data, "root"))


@pytest.fixture(scope="session")
def sample_repo(tmp_path_factory: pytest.TempPathFactory) -> SampleRepo:
    needs_stockfish()
    repo = make_sample_repo(tmp_path_factory.mktemp("sample") / "engine", STOCKFISH)
    git(repo.path, "checkout", "--quiet", "-b", "broken")
    (repo.path / "src" / "Makefile").write_text(BROKEN_MAKEFILE)
    commit(repo.path, "a commit that does not build")
    git(repo.path, "checkout", "--quiet", "master")
    return repo
