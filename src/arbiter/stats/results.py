"""Consistency checks of the result counts a worker reports (reference §3.1).

A worker sends cumulative wins, losses, draws and the pentanomial of game
pairs [LL, LD+DL, WL+LW+DD, WD+DW, WW]. Both views describe the same games,
so they must agree; the messages say what is wrong in the worker's own terms.
"""

from collections.abc import Sequence


class InconsistentResultsError(ValueError):
    """Reported counts contradict each other; the message is meant for the worker author."""


def _count_problems(wins: int, losses: int, draws: int, pentanomial: Sequence[int]) -> list[str]:
    values = {"wins": wins, "losses": losses, "draws": draws}
    problems = [f"{k}={v} must be a non-negative integer" for k, v in values.items() if v < 0]
    if len(pentanomial) != 5:
        problems.append(
            f"pentanomial must have 5 entries [LL, LD, DD+WL, WD, WW], got {len(pentanomial)}"
        )
    elif any(p < 0 for p in pentanomial):
        problems.append(f"pentanomial {list(pentanomial)} has a negative count")
    return problems


def result_problems(
    wins: int,
    losses: int,
    draws: int,
    pentanomial: Sequence[int],
    batch_size: int | None = None,
) -> list[str]:
    """Every inconsistency found (empty when the counts are coherent).

    `batch_size` (SPRT game pairs per update) additionally requires the number
    of pairs to be a multiple of it.
    """
    problems = _count_problems(wins, losses, draws, pentanomial)
    if problems:
        return problems
    games, pairs = wins + losses + draws, sum(pentanomial)
    ll, ld, dd_wl, wd, ww = pentanomial
    if games % 2 != 0:
        problems.append(f"odd number of games ({games}): games are played in pairs")
    if games != 2 * pairs:
        problems.append(
            f"wins+losses+draws = {games} games but the pentanomial counts {pairs} pairs"
            f" ({2 * pairs} games)"
        )
    if wins - losses != 2 * ww + wd - ld - 2 * ll:
        problems.append(
            f"wins-losses = {wins - losses} but the pentanomial implies"
            f" 2*WW+WD-LD-2*LL = {2 * ww + wd - ld - 2 * ll}"
        )
    if not ld + wd <= draws <= ld + 2 * dd_wl + wd:
        problems.append(
            f"draws = {draws} is outside the range the pentanomial allows"
            f" [LD+WD, LD+2*(DD+WL)+WD] = [{ld + wd}, {ld + 2 * dd_wl + wd}]"
        )
    if batch_size is not None and pairs % batch_size != 0:
        problems.append(
            f"{pairs} game pairs is incompatible with the SPRT batch size of {batch_size} pairs"
        )
    return problems


def check_results(
    wins: int,
    losses: int,
    draws: int,
    pentanomial: Sequence[int],
    batch_size: int | None = None,
) -> None:
    """Raise InconsistentResultsError listing every problem, or return if the counts agree."""
    problems = result_problems(wins, losses, draws, pentanomial, batch_size)
    if problems:
        raise InconsistentResultsError("incompatible stats: " + "; ".join(problems))
