"""What the parts that change accounts share: the storage, passwords, the
authentication whose proven workers a change makes forget, and the clock."""

from collections.abc import Callable

from arbiter.domain.accounts.authentication import Authentication
from arbiter.domain.accounts.passwords import Passwords
from arbiter.storage import Storage


class AccountPart:
    def __init__(
        self,
        storage: Storage,
        passwords: Passwords,
        authentication: Authentication,
        clock: Callable[[], float],
    ) -> None:
        self._storage = storage
        self._passwords = passwords
        self._authentication = authentication
        self._clock = clock
