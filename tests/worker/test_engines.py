"""Engines from git: export, the build contract, the cache, failures."""

import subprocess
from pathlib import Path

import pytest

from arbiter.protocol.repo_policy import RepoPolicy
from arbiter.worker.engines import BUILD_FILE, BuildError, EngineCache, read_recipe
from arbiter.worker.errors import ConfigError
from arbiter.worker.gitsource import GitError, export_commit, policy_from_env
from arbiter.worker.host import Compiler
from tests.worker.support import LOCAL_REPOS

COMPILER = Compiler("g++", (12, 2, 0))
WRAPPER = '#!/bin/sh\necho "$@"\n'


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.org"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> str:
    """A repository with one commit of `files`; its SHA."""
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        git(path, "init", "--quiet", "-b", "master")
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "commit")
    return git(path, "rev-parse", "HEAD")


MAKEFILE = (
    "build:\n"
    "\tprintf '#!/bin/sh\\necho $(COMP) $(CXX)\\n' > stockfish\n"
    "\tchmod +x stockfish\n"
    "\techo built >> ../../builds.txt\n"  # counts builds, outside the build tree
)


def test_export_commit(tmp_path: Path) -> None:
    first = make_repo(tmp_path / "repo", {"a.txt": "one"})
    second = make_repo(tmp_path / "repo", {"a.txt": "two", "dir/b.txt": "b"})
    mirrors = tmp_path / "mirrors"
    export_commit((tmp_path / "repo").as_uri(), first, mirrors, tmp_path / "first", LOCAL_REPOS)
    export_commit((tmp_path / "repo").as_uri(), second, mirrors, tmp_path / "second", LOCAL_REPOS)
    assert (tmp_path / "first" / "a.txt").read_text() == "one"
    assert (tmp_path / "second" / "dir" / "b.txt").read_text() == "b"
    with pytest.raises(GitError):
        export_commit(
            (tmp_path / "repo").as_uri(), "0" * 40, mirrors, tmp_path / "none", LOCAL_REPOS
        )
    with pytest.raises(GitError, match="not a full commit SHA"):
        export_commit((tmp_path / "repo").as_uri(), "HEAD", mirrors, tmp_path / "x", LOCAL_REPOS)


def test_default_contract_builds_in_src_and_caches(tmp_path: Path) -> None:
    sha = make_repo(tmp_path / "repo", {"src/Makefile": MAKEFILE})
    cache = EngineCache(tmp_path / "engines", COMPILER, jobs=2, policy=LOCAL_REPOS)
    built = cache.engine((tmp_path / "repo").as_uri(), sha)
    assert built.path.name == "stockfish"
    output = subprocess.run([built.path], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "gcc g++"  # COMP and CXX were passed to make
    again = cache.engine((tmp_path / "repo").as_uri(), sha)
    assert again.path == built.path
    builds = built.path.parents[2] / "builds.txt"  # written by the Makefile, outside src/
    assert builds.read_text() == "built\n"  # the second request came from the cache
    assert (built.path.parents[2] / "build.log").exists()


def test_a_build_file_overrides_the_contract(tmp_path: Path) -> None:
    recipe = (
        'directory = "."\n'
        'command = ["sh", "-c", "mkdir -p bin && cp run.sh bin/my-engine && chmod +x bin/*"]\n'
        'engine = "bin/my-engine"\n'
    )
    sha = make_repo(tmp_path / "repo", {BUILD_FILE: recipe, "run.sh": WRAPPER})
    cache = EngineCache(tmp_path / "engines", None, jobs=1, policy=LOCAL_REPOS)
    built = cache.engine((tmp_path / "repo").as_uri(), sha)
    assert built.path.name == "my-engine"
    assert "nocompiler" in str(built.path)


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ("directory = ", "not valid TOML"),
        ('directory = "../x"', "directory"),
        ("command = []", "command"),
        ('engine = "../../bin/sh"', "engine"),
    ],
)
def test_bad_build_files(tmp_path: Path, recipe: str, message: str) -> None:
    (tmp_path / BUILD_FILE).write_text(recipe)
    with pytest.raises(BuildError, match=message):
        read_recipe(tmp_path)


def test_a_failed_build_reports_its_log_and_leaves_nothing(tmp_path: Path) -> None:
    makefile = "build:\n\t@echo compiling\n\t@echo 'error: this does not build' >&2\n\t@exit 3\n"
    sha = make_repo(tmp_path / "repo", {"Makefile": makefile})
    cache = EngineCache(tmp_path / "engines", COMPILER, jobs=1, policy=LOCAL_REPOS)
    with pytest.raises(BuildError, match="exit 2") as failure:
        cache.engine((tmp_path / "repo").as_uri(), sha)
    assert "error: this does not build" in str(failure.value)
    assert list((tmp_path / "engines" / "builds").iterdir()) == []


def test_a_build_without_an_engine(tmp_path: Path) -> None:
    sha = make_repo(tmp_path / "repo", {"Makefile": "build:\n\ttrue\n"})
    cache = EngineCache(tmp_path / "engines", COMPILER, jobs=1, policy=LOCAL_REPOS)
    with pytest.raises(BuildError, match="no executable stockfish or engine"):
        cache.engine((tmp_path / "repo").as_uri(), sha)


def test_prune_keeps_recent_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("arbiter.worker.engines.KEEP_BUILDS", 1)
    repo = tmp_path / "repo"
    first = make_repo(repo, {"src/Makefile": MAKEFILE})
    second = make_repo(repo, {"src/README": "x"})
    cache = EngineCache(tmp_path / "engines", COMPILER, jobs=1, policy=LOCAL_REPOS)
    cache.engine(repo.as_uri(), first)
    (cache.builds / "leftover.tmp").mkdir()
    kept = cache.engine(repo.as_uri(), second)
    assert [p.name for p in cache.builds.iterdir()] == [kept.path.parents[2].name]


def test_the_worker_refuses_repositories_its_policy_refuses(tmp_path: Path) -> None:
    sha = make_repo(tmp_path / "repo", {"a.txt": "one"})
    mirrors = tmp_path / "mirrors"
    worker_policy = policy_from_env({})
    with pytest.raises(GitError, match=r"not allowed here \(ARBITER_WORKER_GIT_ALLOW=file"):
        export_commit((tmp_path / "repo").as_uri(), sha, mirrors, tmp_path / "x", worker_policy)
    url = "https://127.0.0.1:9/engine.git"  # refused before any connection
    with pytest.raises(GitError, match="non-public address"):
        export_commit(url, sha, mirrors, tmp_path / "y", RepoPolicy(ssh=True))
    assert not (tmp_path / "x").exists()


def test_the_workers_policy_comes_from_its_environment() -> None:
    policy = policy_from_env({"ARBITER_WORKER_GIT_ALLOW": "file, 10.0.0.0/8"})
    assert policy.allow.files
    assert not policy.ssh
    assert policy_from_env({"ARBITER_WORKER_GIT_SSH": "1"}).ssh
    assert policy_from_env({}) == RepoPolicy(allow_setting="ARBITER_WORKER_GIT_ALLOW")
    with pytest.raises(ConfigError, match="ARBITER_WORKER_GIT_ALLOW"):
        policy_from_env({"ARBITER_WORKER_GIT_ALLOW": "not a host!"})
