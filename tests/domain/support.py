"""Helpers for the domain tests: a clock that moves when told, cheap argon2, passwords."""

from argon2 import PasswordHasher

T0 = 1_800_000_000.0

# zxcvbn scores these 4 ("very unguessable"); none contains a test user's name.
PASSWORD = "Tr0ub4dor&3-violet-kettle"
OTHER_PASSWORD = "violet-kettle-Harbor-91"
NEW_PASSWORD = "NewSecret!kettle-77-plum"
WEAK_PASSWORD = "password123"


class Clock:
    """Time that moves only when a test says so."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def cheap_hasher(time_cost: int = 1, memory_cost: int = 8) -> PasswordHasher:
    """argon2id at the lowest cost: the tests check behaviour, not hardness."""
    return PasswordHasher(time_cost=time_cost, memory_cost=memory_cost, parallelism=1)
