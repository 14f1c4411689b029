"""CodeReader on real repositories: a Stockfish-shaped official repository and a
fork (file:// URLs, let through by the allow list), an engine that declares its
own layout, one that declares nothing; deepening a shallow history."""

import threading
from pathlib import Path

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.repos.cache import RepoCache
from arbiter.domain.repos.reading import CodeReader, CodeUnreadable, GitLimits
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow
from tests.domain.repos.support import (
    BIG_1,
    BIG_2,
    SMALL,
    Stockfishes,
    commit,
    git,
    make_stockfishes,
)

LOCAL = RepoPolicy(parse_allow("file"))


@pytest.fixture(scope="module")
def sf(tmp_path_factory: pytest.TempPathFactory) -> Stockfishes:
    return make_stockfishes(tmp_path_factory.mktemp("sf"))


def reader(tmp_path: Path, sf: Stockfishes | None = None, **limits: int) -> CodeReader:
    cache = RepoCache(tmp_path / "cache", max_bytes=1 << 30)
    official = sf.official if sf is not None else ""
    return CodeReader(LOCAL, cache, official_repo=official, limits=GitLimits(**limits))


def test_a_patch_on_master(tmp_path: Path, sf: Stockfishes) -> None:
    facts = reader(tmp_path, sf).read(sf.fork, "master", "patch")
    assert (facts.resolved_base, facts.resolved_new) == (sf.master, sf.patch)
    assert facts.base_nets == [BIG_1, SMALL]
    assert facts.new_nets == [BIG_2, SMALL]
    assert (facts.base_bench, facts.new_bench, facts.master_bench) == ("1100", "1234", "1100")
    assert facts.base_is_master
    assert facts.msg_new.startswith("Use a bigger net\n\nTrained longer.")
    assert [(c.sha, c.subject) for c in facts.commits] == [(sf.patch, "Use a bigger net")]
    assert facts.warnings == []
    assert f'-#define EvalFileDefaultNameBig "{BIG_1}"' in facts.diff
    assert f'+#define EvalFileDefaultNameBig "{BIG_2}"' in facts.diff
    assert not facts.diff_truncated
    assert facts.diff_command == f"git fetch {sf.fork} patch && git diff {sf.master} {sf.patch}"


def test_a_stale_base_is_not_the_latest_common_ancestor(tmp_path: Path, sf: Stockfishes) -> None:
    facts = reader(tmp_path, sf).read(sf.fork, sf.first, "patch")
    assert not facts.base_is_master
    assert facts.master_bench is None
    assert len(facts.warnings) == 1
    assert "not the latest common ancestor" in facts.warnings[0]
    assert sf.master[:10] in facts.warnings[0]
    assert [c.subject for c in facts.commits] == ["Use a bigger net", "Simplify search"]


def test_a_base_that_is_not_an_ancestor(tmp_path: Path, sf: Stockfishes) -> None:
    facts = reader(tmp_path, sf).read(sf.fork, "orphan", "patch")
    assert "The base commit is not an ancestor of the new commit." in facts.warnings
    assert "The base commit is not on the official master." in facts.warnings


def test_a_base_off_master(tmp_path: Path, sf: Stockfishes) -> None:
    facts = reader(tmp_path, sf).read(sf.fork, "side", "patch")
    assert facts.warnings[-1] == "The base commit is not on the official master."
    assert any("not the latest common ancestor" in warning for warning in facts.warnings)


def test_a_commit_against_itself_has_no_warning(tmp_path: Path, sf: Stockfishes) -> None:
    """SPSA tunes a branch against itself: off master, yet no patch to place."""
    facts = reader(tmp_path, sf).read(sf.fork, "side", "side")
    assert facts.warnings == []
    assert facts.commits == []
    assert facts.diff == ""


def test_without_an_official_repository_only_ancestry_is_checked(
    tmp_path: Path, sf: Stockfishes
) -> None:
    facts = reader(tmp_path).read(sf.fork, "old-patch", "patch")
    assert facts.warnings == ["The base commit is not an ancestor of the new commit."]
    assert facts.master_bench is None
    assert facts.base_bench == "999"


def test_the_diff_is_capped(tmp_path: Path, sf: Stockfishes) -> None:
    facts = reader(tmp_path, sf, diff_max_bytes=100).read(sf.fork, "master", "patch")
    assert facts.diff_truncated
    assert len(facts.diff.encode()) <= 100


def test_shallow_history_is_deepened_until_the_commits_meet(tmp_path: Path) -> None:
    sf = make_stockfishes(tmp_path / "deep", master_commits=40)
    read = reader(tmp_path, sf, first_depth=4, max_depth=4096)
    facts = read.read(sf.fork, "old-patch", "patch")  # they meet 40 commits down
    assert facts.warnings[0] == "The base commit is not an ancestor of the new commit."
    assert "not the latest common ancestor" in facts.warnings[1]
    mirror = next((tmp_path / "cache").glob("*.git"))
    depth = git(mirror, "rev-list", "--count", sf.master)
    assert int(depth) >= 40  # deepened, doubling, past the first 4


def test_an_engine_that_declares_its_layout(tmp_path: Path) -> None:
    repo = tmp_path / "other"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    layout = (
        '[nets]\nfile = "nets/default.txt"\nnames = ["DEFAULT_NET"]\n\n[bench]\nprefix = "Nodes:"\n'
    )
    base = commit(
        repo,
        "Start\n\nNodes: 4242",
        {
            "arbiter-engine.toml": layout,
            "nets/default.txt": 'DEFAULT_NET = "nn-dddddddddddd.nnue"\n',
        },
    )
    git(repo, "checkout", "-q", "-b", "dev")
    commit(repo, "Tweak\n\nNodes: 4343", {"engine.c": "x\n"})
    facts = reader(tmp_path).read(repo.as_uri(), "main", "dev")
    assert facts.layout_declared
    assert facts.base_nets == facts.new_nets == ["nn-dddddddddddd.nnue"]
    assert (facts.base_bench, facts.new_bench) == ("4242", "4343")
    assert facts.resolved_base == base


def test_a_bad_layout_file_is_a_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "bad"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "Start", {"arbiter-engine.toml": '[nets]\nfile = "../../etc/passwd"\n'})
    with pytest.raises(ValidationError, match=r"nets\.file must be a relative path"):
        reader(tmp_path).read(repo.as_uri(), "main", "main")


def test_an_engine_without_layout_degrades_to_plain_refs(tmp_path: Path) -> None:
    repo = tmp_path / "plain"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "Start", {"engine.c": "x\n"})
    facts = reader(tmp_path).read(repo.as_uri(), "main", "main")
    assert (facts.base_nets, facts.new_bench, facts.warnings) == ([], None, [])


def test_refused_and_unreadable_repositories(tmp_path: Path) -> None:
    strict = CodeReader(RepoPolicy(), RepoCache(tmp_path / "c", max_bytes=1 << 20))
    with pytest.raises(CodeUnreadable, match="file:// repositories are not allowed") as refused:
        strict.read((tmp_path / "x").as_uri(), "master", "patch")
    assert refused.value.field == "tests_repo"
    with pytest.raises(CodeUnreadable) as missing:
        reader(tmp_path).read((tmp_path / "missing").as_uri(), "master", "patch")
    assert "unreachable, too slow, or not a git repository" in str(missing.value)
    assert "does not appear to be a git repository" in missing.value.reason  # for the log


class CountingReader(CodeReader):
    """Counts fetches (the network's work); everything else is the real reader."""

    fetches = 0

    def _fetch(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        type(self).fetches += 1
        super()._fetch(*args, **kwargs)  # type: ignore[arg-type]


def test_concurrent_reads_of_one_repository_fetch_it_once(tmp_path: Path, sf: Stockfishes) -> None:
    cache = RepoCache(tmp_path / "cache", max_bytes=1 << 30)
    counting = CountingReader(LOCAL, cache)
    results: list[str] = []
    start = threading.Barrier(2)

    def read() -> None:
        start.wait()
        results.append(counting.read(sf.fork, "master", "patch").resolved_new)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [sf.patch, sf.patch]
    assert CountingReader.fetches == 1  # the second found the first one's commits
    assert len(list((tmp_path / "cache").glob("*.git"))) == 1


def test_a_branch_that_moved_is_fetched_again(tmp_path: Path) -> None:
    sf = make_stockfishes(tmp_path / "moving")
    cache = RepoCache(tmp_path / "cache", max_bytes=1 << 30)
    counting = MovingCounter(LOCAL, cache)
    assert counting.read(sf.fork, "master", "patch").resolved_new == sf.patch
    assert counting.read(sf.fork, "master", "patch").resolved_new == sf.patch
    assert MovingCounter.fetches == 1  # nothing moved: listed, not fetched
    fork = Path(sf.fork.removeprefix("file://"))
    git(fork, "checkout", "-q", "patch")
    moved = commit(fork, "Follow-up\n\nBench: 1250", {"src/extra.txt": "y\n"})
    facts = counting.read(sf.fork, "master", "patch")
    assert (facts.resolved_new, facts.new_bench) == (moved, "1250")
    assert MovingCounter.fetches == 2


class MovingCounter(CountingReader):
    fetches = 0
