"""resolve_refs against real local repositories (real git, file:// URLs)."""

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from arbiter.domain.errors import DomainError, ValidationError
from arbiter.domain.git import GitError, resolve_refs

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


def test_invalid_url_is_refused_before_git() -> None:
    with pytest.raises(ValidationError) as caught:
        resolve_refs("--upload-pack=touch /tmp/x", ["master"])
    assert caught.value.field == "tests_repo"


def test_nonexistent_repository_gives_a_clear_error(tmp_path: Path) -> None:
    url = (tmp_path / "missing").as_uri()
    with pytest.raises(GitError) as caught:
        resolve_refs(url, ["master"])
    message = str(caught.value)
    assert message.startswith(f"cannot read the repository {url}: ")
    assert "does not appear to be a git repository" in message
    assert isinstance(caught.value, DomainError)


def test_directory_that_is_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="cannot read the repository"):
        resolve_refs(tmp_path.as_uri(), ["master"])


def test_timeout_is_a_git_error(repo: Repo) -> None:
    # A timeout too small for git to even start stands in for a hanging host.
    with pytest.raises(GitError, match="did not answer within"):
        resolve_refs(repo.url, ["master"], timeout=0.000001)
