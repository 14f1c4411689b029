"""The CPU time open-ended searches may spend: a fifth of a core, in bursts of 2 s."""

from arbiter.domain.search_time import SEARCH_BURST_SECONDS, SEARCH_SHARE, SearchTime


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_search_past_the_burst_waits_until_the_share_has_paid_it_back() -> None:
    clock = Clock()
    budget = SearchTime(clock=clock)
    assert budget.wait() == 0.0
    budget.spend(SEARCH_BURST_SECONDS + 1.0)  # one second in debt
    assert budget.wait() == 1.0 / SEARCH_SHARE
    clock.now += 1.0 / SEARCH_SHARE / 2
    assert budget.wait() == 1.0 / SEARCH_SHARE / 2
    clock.now += 1.0 / SEARCH_SHARE / 2
    assert budget.wait() == 0.0


def test_a_persons_searches_never_wait() -> None:
    """Searches of a few milliseconds, one after another as fast as a script sends them."""
    clock = Clock()
    budget = SearchTime(clock=clock)
    for _ in range(10_000):
        assert budget.wait() == 0.0
        budget.spend(0.005)
        clock.now += 0.03


def test_searches_back_to_back_take_at_most_their_share() -> None:
    clock = Clock()
    budget = SearchTime(clock=clock)
    searched = 0.0
    for _ in range(1000):  # the worst queries, each 0.2 s, whenever allowed
        clock.now += budget.wait()
        budget.spend(0.2)
        clock.now += 0.2
        searched += 0.2
    elapsed = clock.now - 1000.0
    assert searched <= SEARCH_SHARE * elapsed + SEARCH_BURST_SECONDS + 0.2  # + the last one


def test_an_idle_bucket_fills_only_up_to_the_burst() -> None:
    clock = Clock()
    budget = SearchTime(clock=clock)
    clock.now += 3600.0
    budget.spend(SEARCH_BURST_SECONDS)
    assert budget.wait() == 0.0
    budget.spend(0.1)
    assert budget.wait() > 0.0
