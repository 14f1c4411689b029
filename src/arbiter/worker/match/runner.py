"""Playing game pairs several at a time.

Threads: `Match.play` runs in the caller's thread (the task's) and starts
one thread per slot for the duration of the call; each slot thread owns two
engine processes (new and base), kept alive across games and calls, and
plays whole pairs: the same opening twice, colours swapped. Outcomes come
back to the caller through a queue, in completion order; stats are only
ever touched by the caller. Setting the abort event (or leaving the
iteration early) stops every slot within POLL_SLICE: games in progress are
dropped, never counted.
"""

import contextlib
import queue
import threading
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arbiter.worker.match.game import GameRecord, GameRules, Opening, Player, play_game
from arbiter.worker.match.timecontrol import TimeControl
from arbiter.worker.match.uci import Aborted, EngineFailure, EngineStartError, UciEngine

WAIT_SLICE = 0.1  # s: how often the caller looks at the abort event while waiting


@dataclass(frozen=True, slots=True)
class EngineSetup:
    name: str  # e.g. "New-1a2b3c4d"; PGN player name
    command: tuple[str, ...]
    cwd: Path
    options: Mapping[str, str]  # UCI options for every game (Threads, Hash, ...)
    tc: TimeControl


@dataclass(frozen=True, slots=True)
class MatchSetup:
    new: EngineSetup
    base: EngineSetup
    games_at_once: int
    rules: GameRules


@dataclass(frozen=True, slots=True)
class PairJob:
    index: int  # pair number within the task: orders the PGN
    opening: Opening
    new_options: Mapping[str, str] = field(default_factory=dict)  # SPSA values of a batch
    base_options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PairOutcome:
    job: PairJob
    games: tuple[GameRecord, GameRecord]  # new engine white first


class MatchError(Exception):
    """A slot cannot go on (an engine that will not start, an unknown option)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Slot:
    def __init__(self, setup: MatchSetup, number: int) -> None:
        self.setup = setup
        self.new = UciEngine(setup.new.command, setup.new.cwd, f"{setup.new.name}#{number}")
        self.base = UciEngine(setup.base.command, setup.base.cwd, f"{setup.base.name}#{number}")

    def play_pair(self, job: PairJob, abort: threading.Event) -> PairOutcome:
        setup = self.setup
        games: list[GameRecord] = []
        for new_is_white in (True, False):
            self._ready(self.new, {**setup.new.options, **job.new_options}, abort)
            self._ready(self.base, {**setup.base.options, **job.base_options}, abort)
            new = Player(self.new, setup.new.name, setup.new.tc)
            base = Player(self.base, setup.base.name, setup.base.tc)
            white, black = (new, base) if new_is_white else (base, new)
            games.append(play_game(white, black, job.opening, setup.rules, abort))
        return PairOutcome(job, (games[0], games[1]))

    @staticmethod
    def _ready(engine: UciEngine, options: Mapping[str, str], abort: threading.Event) -> None:
        """Restart an engine that crashed, once; then apply the options."""
        if not engine.alive:
            try:
                engine.start(abort)
            except EngineStartError:
                engine.start(abort)  # a second failure is the slot's end
        engine.configure(options)

    def close(self) -> None:
        self.new.quit()
        self.base.quit()

    def kill(self) -> None:
        self.new.kill()
        self.base.kill()


class Match:
    def __init__(self, setup: MatchSetup) -> None:
        self.setup = setup
        self._slots = [_Slot(setup, n) for n in range(1, setup.games_at_once + 1)]

    def play(
        self, jobs: Sequence[PairJob], abort: threading.Event
    ) -> Generator[PairOutcome, None, None]:
        """Yield each pair's outcome as it completes; MatchError if a slot fails.

        Stops early, dropping games in progress, when `abort` is set or the
        caller stops iterating.
        """
        pending: queue.SimpleQueue[PairJob] = queue.SimpleQueue()
        for job in jobs:
            pending.put(job)
        done: queue.SimpleQueue[PairOutcome | BaseException | None] = queue.SimpleQueue()
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=self._work, args=(slot, pending, done, stop), name=f"slot-{n}", daemon=True
            )
            for n, slot in enumerate(self._slots[: max(1, min(len(self._slots), len(jobs)))])
        ]
        for thread in threads:
            thread.start()
        running = len(threads)
        try:
            while running:
                if abort.is_set():
                    return
                try:
                    item = done.get(timeout=WAIT_SLICE)
                except queue.Empty:
                    continue
                if item is None:
                    running -= 1
                elif isinstance(item, BaseException):
                    raise MatchError(item if isinstance(item, Exception) else RuntimeError(item))
                else:
                    yield item
        finally:
            stop.set()
            for thread in threads:
                thread.join()

    def _work(
        self,
        slot: _Slot,
        pending: "queue.SimpleQueue[PairJob]",
        done: "queue.SimpleQueue[PairOutcome | BaseException | None]",
        stop: threading.Event,
    ) -> None:
        """A slot thread: play pairs until none is left or the match stops."""
        try:
            while not stop.is_set():
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    break
                done.put(slot.play_pair(job, stop))
        except Aborted:
            slot.kill()  # mid-search: the engines' state is unknown, start afresh next time
        except (EngineFailure, OSError) as error:
            slot.kill()
            done.put(error)
        except BaseException as error:  # a bug: let the caller report it, never hang it
            slot.kill()
            done.put(error)
        finally:
            done.put(None)

    def close(self) -> None:
        """Quit every engine; the match cannot be used afterwards."""
        for slot in self._slots:
            with contextlib.suppress(Exception):
                slot.close()
