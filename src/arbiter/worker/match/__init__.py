"""Our match runner on python-chess: UCI engines, clocks, adjudication, game
pairs several at a time, pentanomial counting and PGN. Knows nothing of the
server: the task module feeds it and reports what it yields.
"""

from arbiter.worker.match.adjudication import REFERENCE_RULES, AdjudicationRules, Adjudicator
from arbiter.worker.match.game import (
    DRAW,
    Fault,
    GameRecord,
    GameRules,
    MoveRecord,
    Opening,
    Player,
    play_game,
    rules_ending,
)
from arbiter.worker.match.pgn import game_pgn
from arbiter.worker.match.results import MatchStats, new_points, pentanomial_index
from arbiter.worker.match.runner import (
    EngineSetup,
    Match,
    MatchError,
    MatchSetup,
    PairJob,
    PairOutcome,
)
from arbiter.worker.match.timecontrol import Clock, TimeControl, go_command, parse_time_control
from arbiter.worker.match.uci import (
    Aborted,
    EngineDisconnected,
    EngineFailure,
    EngineStartError,
    EngineTimeout,
    SearchResult,
    UciEngine,
    UnknownOption,
    parse_info,
)

__all__ = [
    "DRAW",
    "REFERENCE_RULES",
    "Aborted",
    "AdjudicationRules",
    "Adjudicator",
    "Clock",
    "EngineDisconnected",
    "EngineFailure",
    "EngineSetup",
    "EngineStartError",
    "EngineTimeout",
    "Fault",
    "GameRecord",
    "GameRules",
    "Match",
    "MatchError",
    "MatchSetup",
    "MatchStats",
    "MoveRecord",
    "Opening",
    "PairJob",
    "PairOutcome",
    "Player",
    "SearchResult",
    "TimeControl",
    "UciEngine",
    "UnknownOption",
    "game_pgn",
    "go_command",
    "new_points",
    "parse_info",
    "parse_time_control",
    "pentanomial_index",
    "play_game",
    "rules_ending",
]
