"""resolve_refs against real local repositories (real git, file:// URLs)."""

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.refs import resolve_refs as resolve_on_target
from arbiter.domain.repos.runner import GitFailed
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow

LOCAL = RepoPolicy(parse_allow("file"))


def resolve_refs(
    url: str, refs: list[str], fields: dict[str, str] | None = None, timeout: float = 20.0
) -> dict[str, str]:
    target = LOCAL.check(url)
    found = resolve_on_target(target, refs, fields or {}, timeout=timeout)
    return {ref: item.sha for ref, item in found.items()}


IDENTITY = [
    "-c",
    "user.name=Test",
    "-c",
    "user.email=test@example.org",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *IDENTITY, *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@dataclass(frozen=True)
class Repo:
    url: str
    first: str  # commit on master, tagged v1 (annotated) and light (lightweight)
    second: str  # commit on branch feature
    third: str  # commit on master after first; branch "clash" = tag "clash" differ


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    path = tmp_path_factory.mktemp("origin")
    git(path, "init", "-q", "-b", "master")
    git(path, "commit", "-q", "--allow-empty", "-m", "first")
    first = git(path, "rev-parse", "HEAD")
    git(path, "tag", "-a", "v1", "-m", "release 1")
    git(path, "tag", "light")
    git(path, "checkout", "-q", "-b", "feature")
    git(path, "commit", "-q", "--allow-empty", "-m", "second")
    second = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "master")
    git(path, "commit", "-q", "--allow-empty", "-m", "third")
    third = git(path, "rev-parse", "HEAD")
    git(path, "branch", "clash", third)
    git(path, "tag", "-a", "clash", first, "-m", "same name as a branch")
    git(path, "branch", "nested/name", second)
    return Repo(path.as_uri(), first, second, third)


def test_branches_resolve(repo: Repo) -> None:
    resolved = resolve_refs(repo.url, ["master", "feature", "nested/name"])
    assert resolved == {"master": repo.third, "feature": repo.second, "nested/name": repo.second}


def test_annotated_tag_resolves_to_its_commit(repo: Repo) -> None:
    assert resolve_refs(repo.url, ["v1"]) == {"v1": repo.first}


def test_lightweight_tag(repo: Repo) -> None:
    assert resolve_refs(repo.url, ["light"]) == {"light": repo.first}


def test_branch_wins_over_tag_of_the_same_name(repo: Repo) -> None:
    assert resolve_refs(repo.url, ["clash"]) == {"clash": repo.third}


def test_full_ref_names(repo: Repo) -> None:
    resolved = resolve_refs(repo.url, ["refs/tags/clash", "refs/heads/feature"])
    assert resolved == {"refs/tags/clash": repo.first, "refs/heads/feature": repo.second}


def test_full_sha_is_returned_as_is(repo: Repo) -> None:
    upper = repo.second.upper()
    assert resolve_refs(repo.url, [upper, "master"]) == {upper: repo.second, "master": repo.third}


def test_full_shas_need_no_git(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    missing = (tmp_path / "nothing").as_uri()
    assert resolve_refs(missing, [sha]) == {sha: sha}


def test_same_ref_twice(repo: Repo) -> None:
    assert resolve_refs(repo.url, ["master", "master"]) == {"master": repo.third}


def test_short_sha_is_refused_clearly(repo: Repo) -> None:
    with pytest.raises(ValidationError) as caught:
        resolve_refs(repo.url, [repo.first[:10]], fields={repo.first[:10]: "base_tag"})
    assert caught.value.field == "base_tag"
    assert "full 40-character SHA" in str(caught.value)


def test_unknown_ref_names_the_field(repo: Repo) -> None:
    with pytest.raises(ValidationError) as caught:
        resolve_refs(repo.url, ["master", "nope"], fields={"master": "base_tag", "nope": "new_tag"})
    assert caught.value.field == "new_tag"
    assert str(caught.value) == f"no branch or tag named 'nope' in {repo.url}"


def test_unknown_ref_default_field(repo: Repo) -> None:
    with pytest.raises(ValidationError) as caught:
        resolve_refs(repo.url, ["nope"])
    assert caught.value.field == "ref"


def test_invalid_ref_is_refused_before_git(repo: Repo) -> None:
    with pytest.raises(ValidationError) as caught:
        resolve_refs(repo.url, ["--upload-pack=touch"], fields={"--upload-pack=touch": "new_tag"})
    assert caught.value.field == "new_tag"


def test_listed_ref_names_are_kept(repo: Repo) -> None:
    found = resolve_on_target(LOCAL.check(repo.url), ["v1", "feature"], {}, timeout=20)
    assert found["v1"].ref == "refs/tags/v1"  # peeled, named without ^{}
    assert found["feature"].ref == "refs/heads/feature"


def test_nonexistent_repository_fails_with_gits_reason(tmp_path: Path) -> None:
    url = (tmp_path / "missing").as_uri()
    with pytest.raises(GitFailed) as caught:
        resolve_refs(url, ["master"])
    assert "does not appear to be a git repository" in caught.value.reason


def test_timeout_kills_git(tmp_path: Path) -> None:
    # A repository whose refs file is a FIFO nobody writes: git blocks reading it,
    # as it would on a host that never answers. (A timeout too small for git to
    # start was flaky: on a loaded machine git could finish before the first check.)
    hanging = tmp_path / "hanging.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hanging)], check=True)
    os.mkfifo(hanging / "packed-refs")
    started = time.monotonic()
    with pytest.raises(GitFailed) as caught:
        resolve_refs(f"file://{hanging}", ["master"], timeout=0.5)
    assert caught.value.timed_out
    assert time.monotonic() - started < 10
