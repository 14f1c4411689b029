"""A proof of work for the signup form, self-hosted with ALTCHA's challenges.

A scripted signup costs the script nothing but a request; a proof of work
makes each one cost it work (three quarters of a million SHA-256 by default,
a second of a browser's time), while a person filling the
form never notices (the browser solves it while they type). The challenge is
ALTCHA's (version 2: iterated SHA-256 of a salt, a nonce and a counter,
signed with an HMAC of the server's secret so nobody can forge an easier
one): the server picks a counter between half of `ceiling` and `ceiling`
and publishes the first bytes of its key, and the browser tries counters
from 0 until a key starts with them. No third party sees anything.

A solved challenge is good once: the nonces of those accepted are kept until
their challenge expires, in this process (a second process could take the
same payload once more, which costs an attacker a second signup for one
proof, still bounded by the per-address signup limit).
Runs in the threadpool or on the event loop: no I/O.
"""

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import altcha

from arbiter.domain.errors import ValidationError

ALGORITHM = "SHA-256"
LIFETIME_SECONDS = 1800  # a challenge may be solved and sent within half an hour
KEY_PREFIX_BYTES = 4  # of the derived key the browser must match (32 bits: no chance hits)
FIELD = "proof"


class SignupProofs:
    """Challenges of about `ceiling` · 3/4 hashes on average (0: no proof asked)."""

    def __init__(self, secret: str, ceiling: int, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._ceiling = ceiling
        self._clock = clock
        self._lock = threading.Lock()
        self._used: dict[str, float] = {}  # nonce -> when its challenge expires

    @property
    def asked(self) -> bool:
        return self._ceiling > 0

    def challenge(self) -> dict[str, Any]:
        """A new signed challenge, as the page gives it to the browser."""
        counter = self._ceiling // 2 + secrets.randbelow(self._ceiling - self._ceiling // 2 + 1)
        made = altcha.create_challenge(
            ALGORITHM,
            1,
            counter=counter,
            key_prefix_length=KEY_PREFIX_BYTES,
            expires_at=int(self._clock() + LIFETIME_SECONDS),
            hmac_secret=self._secret,
        )
        challenge: dict[str, Any] = made.to_dict()
        return challenge

    def check(self, payload: str) -> None:
        """ValidationError on the proof field unless `payload` solves a challenge
        of ours, unexpired and not used before."""
        if not self.asked:
            return
        if not payload:
            raise ValidationError(FIELD, "The proof of work is missing: let the page finish it.")
        result = altcha.verify_solution(payload, self._secret)
        if result.expired:
            raise ValidationError(FIELD, "The proof of work has expired: reload the page.")
        if not result.verified:
            raise ValidationError(FIELD, "The proof of work is not valid: reload the page.")
        nonce = altcha.Payload.from_base64(payload).challenge.parameters.nonce
        self._use_once(nonce)

    def _use_once(self, nonce: str) -> None:
        now = self._clock()
        with self._lock:
            self._used = {kept: until for kept, until in self._used.items() if until > now}
            if nonce in self._used:
                raise ValidationError(FIELD, "This proof of work was used before: reload the page.")
            self._used[nonce] = now + LIFETIME_SECONDS
