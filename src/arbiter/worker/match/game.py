"""One game between two UCI engines, refereed with python-chess.

The board checks every move the engines send and ends the game by the
rules (mate, stalemate, insufficient material, 50 moves, threefold
repetition), by adjudication, or by a fault: a crash, a stall, a time
forfeit or an illegal move, each of which loses the game for that engine.
Runs in the calling thread (a match slot); blocking.
"""

import threading
import time
from dataclasses import dataclass
from enum import Enum

import chess

from arbiter.worker.match.adjudication import AdjudicationRules, Adjudicator
from arbiter.worker.match.timecontrol import Clock, TimeControl, go_command
from arbiter.worker.match.uci import (
    EngineDisconnected,
    EngineFailure,
    EngineTimeout,
    SearchResult,
    UciEngine,
)

WHITE_WINS, BLACK_WINS, DRAW = "1-0", "0-1", "1/2-1/2"


@dataclass(frozen=True, slots=True)
class Opening:
    fen: str  # the start position, a full FEN
    moves: tuple[str, ...] = ()  # UCI moves played from it (PGN books)


class Fault(Enum):
    CRASH = "crash"  # the engine exited or closed its output
    STALL = "stall"  # a fixed-nodes search that never ended
    TIME = "time"  # flag fell
    ILLEGAL = "illegal"  # an illegal or missing move


@dataclass(frozen=True, slots=True)
class Player:
    engine: UciEngine
    name: str
    tc: TimeControl


@dataclass(frozen=True, slots=True)
class GameRules:
    adjudication: AdjudicationRules | None  # None: play every game out
    chess960: bool = False
    # Tolerated overstep of the clock per move: our measurement includes pipe
    # and thread-scheduling latency on a loaded machine, not only thinking.
    time_margin: float = 0.05


@dataclass(frozen=True, slots=True)
class MoveRecord:
    uci: str
    score: int | None
    depth: int | None
    elapsed: float


@dataclass(frozen=True, slots=True)
class GameRecord:
    white: str
    black: str
    opening: Opening
    moves: tuple[MoveRecord, ...]  # the engines' moves, after the opening's
    result: str  # "1-0", "0-1", "1/2-1/2"
    termination: str  # why it ended, for people: "checkmate", "time forfeit", ...
    fault: Fault | None
    fault_white: bool  # whose fault it was, when there is one
    chess960: bool
    duration: float  # wall seconds of the whole game
    thinking: float  # seconds the engines spent between `go` and `bestmove`
    detail: str = ""  # e.g. the illegal move
    nodes: int = 0  # the engines searched, as they said in their last `info` lines
    search_ms: int = 0  # the time those searches took, by the same lines


class _Game:
    """The state of a game in progress; `play_game` drives it."""

    def __init__(self, white: Player, black: Player, opening: Opening, rules: GameRules) -> None:
        self.players = (white, black)
        self.rules = rules
        self.opening = opening
        self.board = chess.Board(opening.fen, chess960=rules.chess960)
        for move in opening.moves:
            self.board.push_uci(move)
        start = "startpos" if opening.fen == chess.STARTING_FEN else f"fen {opening.fen}"
        self.position_head = f"position {start}"
        self.all_moves = list(opening.moves)
        self.clocks = (Clock(white.tc), Clock(black.tc))
        self.moves: list[MoveRecord] = []
        self.adjudicator = Adjudicator(rules.adjudication) if rules.adjudication else None
        self.thinking = 0.0
        self.nodes = 0
        self.search_ms = 0

    def position(self) -> str:
        if not self.all_moves:
            return self.position_head
        return f"{self.position_head} moves {' '.join(self.all_moves)}"


def play_game(
    white: Player,
    black: Player,
    opening: Opening,
    rules: GameRules,
    abort: threading.Event | None = None,
) -> GameRecord:
    """Play from the opening to the end; raises Aborted when `abort` is set."""
    started = time.monotonic()
    game = _Game(white, black, opening, rules)
    ending = _start(game, abort) or _play(game, abort)
    result, termination, fault, fault_white, detail = ending
    return GameRecord(
        white=white.name,
        black=black.name,
        opening=opening,
        moves=tuple(game.moves),
        result=result,
        termination=termination,
        fault=fault,
        fault_white=fault_white,
        chess960=rules.chess960,
        duration=time.monotonic() - started,
        thinking=game.thinking,
        detail=detail,
        nodes=game.nodes,
        search_ms=game.search_ms,
    )


_Ending = tuple[str, str, Fault | None, bool, str]


def _start(game: _Game, abort: threading.Event | None) -> _Ending | None:
    """`ucinewgame` to both engines, then wait for both (they clear their hash
    in parallel). An engine that fails here loses the game as a crash."""
    engines = [player.engine for player in game.players]
    for waiting in (False, True):
        for white, engine in zip((True, False), engines, strict=True):
            try:
                if waiting:
                    engine.wait_ready(abort)
                else:
                    engine.new_game()
            except EngineFailure:
                engine.kill()
                return _loss(white, "engine not ready", Fault.CRASH)
    return None


@dataclass(frozen=True, slots=True)
class _Search:
    """A search under way: who, since when, and its time limit."""

    white: bool
    started: float | None  # None: the engine was gone before it could start
    timeout: float


def _play(game: _Game, abort: threading.Event | None) -> _Ending:
    """Alternate searches until the game ends.

    Pipelined: as soon as a move arrives, the opponent is sent the new
    position and starts thinking, and only then is the move refereed (legal?
    game over? adjudicated?). The refereeing thus runs while an engine
    thinks instead of between searches; when it ends the game, the
    opponent's search is stopped and its answer dropped (once per game).
    """
    over = rules_ending(game.board)
    if over is not None:
        return over[0], over[1], None, False, ""
    search = _launch(game, game.board.turn == chess.WHITE, None)
    while True:
        found = _collect(game, search, abort)
        if isinstance(found, tuple):
            return found
        following = _launch(game, not search.white, found.move)
        ending = _referee(game, found)
        if ending is not None:
            _cancel(game, following, abort)
            return ending
        search = following


def _launch(game: _Game, white: bool, move: str | None) -> _Search:
    """Send `go` to the side to move, `move` (not yet refereed) appended."""
    clock = game.clocks[0 if white else 1]
    engine = game.players[0 if white else 1].engine
    if move is not None:
        game.all_moves.append(move)
    go = go_command(game.clocks[0], game.clocks[1], white)
    try:
        started = engine.go(game.position(), go)
    except EngineDisconnected:
        started = None
    return _Search(white, started, clock.deadline(game.rules.time_margin))


def _collect(game: _Game, search: _Search, abort: threading.Event | None) -> SearchResult | _Ending:
    """The search's result, or how the game ended while it ran."""
    white = search.white
    player = game.players[0 if white else 1]
    clock = game.clocks[0 if white else 1]
    try:
        if search.started is None:
            raise EngineDisconnected(player.engine.name)
        found = player.engine.result(search.started, search.timeout, abort)
    except EngineTimeout:
        if not player.engine.stop_search(abort):
            player.engine.kill()  # hung: the slot starts it afresh for the next game
        if clock.tc.is_nodes:
            return _loss(white, "engine stalled", Fault.STALL)
        return _time_loss(white, game.board)
    except EngineDisconnected:
        return _loss(white, "engine crashed", Fault.CRASH)
    game.thinking += found.elapsed
    game.nodes += found.nodes
    game.search_ms += found.search_ms
    if not clock.spend(found.elapsed, game.rules.time_margin):
        return _time_loss(white, game.board)
    return found


def _cancel(game: _Game, search: _Search, abort: threading.Event | None) -> None:
    """Stop a search whose answer is not wanted, and drop its `bestmove`."""
    engine = game.players[0 if search.white else 1].engine
    if engine.alive and not engine.stop_search(abort):
        engine.kill()


def _referee(game: _Game, found: SearchResult) -> _Ending | None:
    """Play a searched move on the board; how the game ended, if it did."""
    board = game.board
    white = board.turn == chess.WHITE
    move = _legal_move(board, found.move)
    if move is None:
        result = BLACK_WINS if white else WHITE_WINS
        return result, "illegal move", Fault.ILLEGAL, white, found.move
    board.push(move)
    game.moves.append(MoveRecord(found.move, found.score, found.depth, found.elapsed))
    over = rules_ending(board)
    if over is not None:
        return over[0], over[1], None, False, ""
    if game.adjudicator is None:
        return None
    verdict = game.adjudicator.record(white, found.score, len(board.move_stack))
    if verdict == "resign":
        return (BLACK_WINS if white else WHITE_WINS), "adjudication: resign", None, False, ""
    if verdict == "draw":
        return DRAW, "adjudication: draw", None, False, ""
    return None


def rules_ending(board: chess.Board) -> tuple[str, str] | None:
    """(result, reason) when the rules end the game here; None otherwise.

    The 50-move rule and threefold repetition end the game at once, as in
    engine matches, instead of waiting for a claim.
    """
    if not any(board.generate_legal_moves()):
        if board.is_check():
            return (BLACK_WINS if board.turn == chess.WHITE else WHITE_WINS), "checkmate"
        return DRAW, "stalemate"
    if board.is_insufficient_material():
        return DRAW, "insufficient material"
    if board.halfmove_clock >= 100:
        return DRAW, "50-move rule"
    if board.is_repetition(3):
        return DRAW, "threefold repetition"
    return None


def _legal_move(board: chess.Board, text: str) -> chess.Move | None:
    try:
        move = board.parse_uci(text)
    except ValueError:  # malformed, or illegal in this position
        return None
    return move or None  # "0000", the null move, is no move


def _loss(white: bool, reason: str, fault: Fault) -> _Ending:
    return (BLACK_WINS if white else WHITE_WINS), reason, fault, white, ""


def _time_loss(white: bool, board: chess.Board) -> _Ending:
    """Losing on time, unless the opponent could never mate: then a draw."""
    opponent = chess.BLACK if white else chess.WHITE
    if board.has_insufficient_material(opponent):
        return DRAW, "time forfeit, opponent cannot win", Fault.TIME, white, ""
    return (BLACK_WINS if white else WHITE_WINS), "time forfeit", Fault.TIME, white, ""
