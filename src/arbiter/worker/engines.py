"""Engines built from source, cached by commit and compiler.

The build contract (docs/worker.md): the worker runs `make -j<N> build
COMP=<gcc|clang> CXX=<compiler>` in the commit's `src/` directory (or its
root when there is no `src/`) and then uses the executable named
`stockfish` or `engine` in that directory. A repository changes any of this
with an `arbiter-build.toml` at its root:

    directory = "."                               # where to build
    command = ["make", "-j{jobs}", "release"]     # {jobs} {compiler} {comp}
    engine = "bin/my-engine"                      # relative to directory

A build lives in `builds/<sha>-<compiler>-<version>/` with its source tree
(wrapper scripts may need their files) and `build.log`; it is built in a
temporary directory and renamed into place only when it succeeded, so a
killed worker never leaves a half-built engine in the cache. The oldest
builds beyond KEEP_BUILDS, and any unused for MAX_AGE_DAYS, are pruned.
Blocking (git, make): the task's thread.
"""

import json
import logging
import os
import shutil
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from arbiter.protocol.repo_policy import RepoPolicy
from arbiter.worker.errors import WorkerError
from arbiter.worker.gitsource import export_commit
from arbiter.worker.host import Compiler

log = logging.getLogger("arbiter.worker.engines")

BUILD_FILE = "arbiter-build.toml"
ENGINE_NAMES = ("stockfish", "engine")
BUILD_SECONDS = 1800.0
KEEP_BUILDS = 20
MAX_AGE_DAYS = 30
LOG_TAIL_CHARS = 3000  # of the build log sent with failed_task (the server keeps 5120)


class BuildError(WorkerError):
    """The engine did not build; the message ends with the build log's tail."""


@dataclass(frozen=True, slots=True)
class BuildRecipe:
    directory: str
    command: tuple[str, ...]
    engine: str  # "" to look for ENGINE_NAMES


@dataclass(frozen=True, slots=True)
class BuiltEngine:
    sha: str
    path: Path  # the executable


def default_recipe(root: Path) -> BuildRecipe:
    directory = "src" if (root / "src").is_dir() else "."
    return BuildRecipe(
        directory, ("make", "-j{jobs}", "build", "COMP={comp}", "CXX={compiler}"), ""
    )


def read_recipe(root: Path) -> BuildRecipe:
    """The repository's own recipe, filled in with the defaults."""
    recipe = default_recipe(root)
    path = root / BUILD_FILE
    if not path.exists():
        return recipe
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BuildError(f"{BUILD_FILE}: not valid TOML ({error})") from None
    directory = raw.get("directory", recipe.directory)
    command = raw.get("command", list(recipe.command))
    engine = raw.get("engine", "")
    if not isinstance(directory, str) or ".." in Path(directory).parts:
        raise BuildError(f"{BUILD_FILE}: directory must be a path inside the repository")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise BuildError(f"{BUILD_FILE}: command must be a non-empty list of strings")
    if not isinstance(engine, str) or ".." in Path(engine).parts:
        raise BuildError(f"{BUILD_FILE}: engine must be a path inside the build directory")
    return BuildRecipe(directory, tuple(command), engine)


class EngineCache:
    def __init__(
        self, root: Path, compiler: Compiler | None, jobs: int, *, policy: RepoPolicy
    ) -> None:
        self.root = root
        self.policy = policy  # which repository URLs this worker fetches from
        self.builds = root / "builds"
        self.mirrors = root / "git"
        self.compiler = compiler
        self.jobs = max(1, jobs)

    def key(self, sha: str) -> str:
        if self.compiler is None:
            return f"{sha}-nocompiler"
        return f"{sha}-{self.compiler.name}-{'.'.join(map(str, self.compiler.version))}"

    def engine(self, repo_url: str, sha: str) -> BuiltEngine:
        """The cached build of `sha`, or a fresh one; BuildError when it fails."""
        entry = self.builds / self.key(sha)
        cached = _cached(entry)
        if cached is not None:
            os.utime(entry)  # recently used: pruned last
            return BuiltEngine(sha, cached)
        try:
            built = self._build(repo_url, sha, entry)
        finally:
            # A failed build leaves nothing behind; its log went into the error.
            shutil.rmtree(entry.with_name(entry.name + ".tmp"), ignore_errors=True)
        self.prune()
        return BuiltEngine(sha, built)

    def _build(self, repo_url: str, sha: str, entry: Path) -> Path:
        staging = entry.with_name(entry.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        self.builds.mkdir(parents=True, exist_ok=True)
        export_commit(repo_url, sha, self.mirrors, staging / "source", self.policy)
        recipe = read_recipe(staging / "source")
        workdir = staging / "source" / recipe.directory
        if not workdir.is_dir():
            raise BuildError(f"build directory {recipe.directory!r} does not exist in {sha[:10]}")
        started = time.monotonic()
        self._run(recipe, workdir, staging / "build.log", sha)
        engine = _find_engine(workdir, recipe)
        if engine is None:
            names = recipe.engine or " or ".join(ENGINE_NAMES)
            raise BuildError(
                f"the build of {sha[:10]} made no executable {names} in {recipe.directory}"
            )
        relative = engine.relative_to(staging)
        (staging / "engine.json").write_text(json.dumps({"engine": str(relative), "sha": sha}))
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
        log.info("built %s in %.1f s", sha[:10], time.monotonic() - started)
        return entry / relative

    def _run(self, recipe: BuildRecipe, workdir: Path, log_path: Path, sha: str) -> None:
        compiler = self.compiler
        values = {
            "jobs": str(self.jobs),
            "compiler": compiler.name if compiler else "c++",
            "comp": compiler.comp if compiler else "gcc",
        }
        command = [part.format(**values) for part in recipe.command]
        env = {**os.environ}
        if compiler is not None:
            env["CXX"] = compiler.name
        log.info("building %s: %s (in %s)", sha[:10], " ".join(command), recipe.directory)
        with log_path.open("wb") as sink:
            try:
                done = subprocess.run(  # noqa: S603 - the build the contract describes
                    command,
                    cwd=workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=env,
                    timeout=BUILD_SECONDS,
                    check=False,
                )
                code = done.returncode
            except subprocess.TimeoutExpired:
                code = -1
            except OSError as error:
                raise BuildError(f"cannot run {command[0]}: {error}") from None
        if code != 0:
            tail = log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
            why = "timed out" if code == -1 else f"exit {code}"
            raise BuildError(f"build of {sha[:10]} failed ({why}); end of the build log:\n{tail}")

    def prune(self) -> None:
        """Drop leftovers of interrupted builds, builds beyond KEEP_BUILDS, and old ones."""
        if not self.builds.exists():
            return
        entries = []
        for entry in self.builds.iterdir():
            if entry.name.endswith(".tmp"):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.is_dir():
                entries.append(entry)
        entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        cutoff = time.time() - MAX_AGE_DAYS * 86400
        for index, entry in enumerate(entries):
            if index >= KEEP_BUILDS or entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)


def _cached(entry: Path) -> Path | None:
    try:
        recorded = json.loads((entry / "engine.json").read_text())
        path = entry / str(recorded["engine"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _find_engine(workdir: Path, recipe: BuildRecipe) -> Path | None:
    names = (recipe.engine,) if recipe.engine else ENGINE_NAMES
    for name in names:
        path = workdir / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None
