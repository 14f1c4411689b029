"""The signup form's proof of work: ALTCHA's challenges, signed, solved once."""

import base64
import json
import time

import altcha
import pytest

from arbiter.domain.accounts.signup_proof import SignupProofs
from arbiter.domain.errors import ValidationError

SECRET = "server secret"


def solved(challenge: dict[str, object]) -> str:
    """What a browser sends after solving `challenge` (ALTCHA's own solver here)."""
    parsed = altcha.Challenge.from_dict(challenge)
    solution = altcha.solve_challenge(parsed)
    assert solution is not None
    return altcha.Payload(parsed, solution).to_base64()


def refusal(proofs: SignupProofs, payload: str) -> str:
    with pytest.raises(ValidationError) as refused:
        proofs.check(payload)
    assert refused.value.field == "proof"
    return str(refused.value)


def test_a_solved_challenge_is_accepted_once() -> None:
    proofs = SignupProofs(SECRET, 2000)
    payload = solved(proofs.challenge())
    proofs.check(payload)
    assert "used before" in refusal(proofs, payload)


def test_the_work_is_between_half_the_ceiling_and_the_ceiling() -> None:
    proofs = SignupProofs(SECRET, 2000)
    for _ in range(5):
        challenge = altcha.Challenge.from_dict(proofs.challenge())
        solution = altcha.solve_challenge(challenge)
        assert solution is not None
        assert 1000 <= solution.counter <= 2000


def test_a_missing_forged_or_expired_proof_is_refused() -> None:
    proofs = SignupProofs(SECRET, 2000)
    assert "missing" in refusal(proofs, "")
    assert "not valid" in refusal(proofs, "not base64 at all")
    # An easier challenge of the sender's own, signed with another secret.
    forged = SignupProofs("another secret", 10)
    assert "not valid" in refusal(proofs, solved(forged.challenge()))
    # A wrong counter for a genuine challenge.
    payload = json.loads(base64.b64decode(solved(proofs.challenge())))
    payload["solution"]["counter"] += 1
    assert "not valid" in refusal(proofs, base64.b64encode(json.dumps(payload).encode()).decode())
    stale = SignupProofs(SECRET, 2000, clock=lambda: time.time() - 3600)
    assert "expired" in refusal(proofs, solved(stale.challenge()))


def test_no_proof_is_asked_when_the_ceiling_is_zero() -> None:
    proofs = SignupProofs(SECRET, 0)
    assert not proofs.asked
    proofs.check("")
