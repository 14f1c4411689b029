"""The request_task admission gate: places shared by every account, a share each."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from arbiter.domain.runs.admission import AdmissionGate, fair_share


def test_the_default_share_is_half_the_gate_at_least_one() -> None:
    assert [fair_share(size) for size in (1, 2, 3, 5, 10)] == [1, 1, 1, 2, 5]


def test_one_account_holds_at_most_its_share_and_others_get_the_rest() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)
    assert [gate.enter("flood") for _ in range(4)] == [True, True, False, False]
    assert [gate.enter("alice") for _ in range(2)] == [True, True]
    assert gate.enter("bob")  # the fifth place
    assert not gate.enter("carol")  # the gate itself is full
    gate.leave("bob")
    assert gate.enter("carol")


def test_accounts_are_counted_case_insensitively() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)
    assert gate.enter("Flood")
    assert gate.enter("FLOOD")
    assert not gate.enter("flood")
    assert gate.held_by("fLoOd") == 2
    gate.leave("flood")
    assert gate.enter("Flood")


def test_a_place_given_back_frees_both_the_account_and_the_gate() -> None:
    places = threading.Semaphore(2)
    gate = AdmissionGate(places, per_account=1)
    assert gate.enter("alice")
    gate.leave("Alice")
    assert gate.held_by("alice") == 0
    assert gate.enter("alice")
    assert gate.enter("bob")
    assert not places.acquire(blocking=False)  # both places are taken again


def test_without_a_cap_one_account_may_fill_the_gate() -> None:
    gate = AdmissionGate(threading.Semaphore(3), per_account=None)
    assert [gate.enter("flood") for _ in range(4)] == [True, True, True, False]


def test_a_share_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="per_account"):
        AdmissionGate(threading.Semaphore(5), per_account=0)


def test_concurrent_callers_never_exceed_the_share_or_the_gate() -> None:
    """40 threads of one account and 3 of others enter and leave at once, many
    times: at no moment does the flood hold more than its share, and the other
    accounts are never shut out by it."""
    size, share = 5, 2
    gate = AdmissionGate(threading.Semaphore(size), per_account=share)
    lock = threading.Lock()
    holding = {"flood": 0, "others": 0}
    most = {"flood": 0, "total": 0}
    refused_others = 0
    start = threading.Barrier(43)

    def caller(account: str, kind: str) -> None:
        nonlocal refused_others
        start.wait()
        for _ in range(300):
            if not gate.enter(account):
                if kind == "others":
                    with lock:
                        refused_others += 1
                continue
            with lock:
                holding[kind] += 1
                most["flood"] = max(most["flood"], holding["flood"])
                most["total"] = max(most["total"], holding["flood"] + holding["others"])
            with lock:
                holding[kind] -= 1
            gate.leave(account)

    with ThreadPoolExecutor(max_workers=43) as pool:
        for _ in range(40):
            pool.submit(caller, "Flood", "flood")
        for name in ("alice", "bob", "carol"):
            pool.submit(caller, name, "others")
    assert most["flood"] <= share
    assert most["total"] <= size
    # Three other accounts, one call each at a time, always fit in the 3 places
    # the flood cannot take.
    assert refused_others == 0
    assert gate.held_by("flood") == 0


def test_holds_share_tells_an_accounts_refusal_from_a_full_gate() -> None:
    gate = AdmissionGate(threading.Semaphore(3), per_account=2)
    assert gate.enter("flood")
    assert not gate.holds_share("flood")
    assert gate.enter("Flood")
    assert gate.holds_share("FLOOD")  # its next call is refused for its share
    assert gate.enter("alice")
    assert not gate.enter("alice")  # the gate is full: not alice's doing
    assert not gate.holds_share("alice")
    assert not AdmissionGate(threading.Semaphore(1), per_account=None).holds_share("x")


def test_a_share_below_one_place_is_refused_with_its_reason() -> None:
    with pytest.raises(ValueError, match=r"\Aper_account must be at least 1\Z"):
        AdmissionGate(threading.Semaphore(5), per_account=0)


def test_the_gate_remembers_only_accounts_holding_a_place() -> None:
    """Memory stays bounded by the gate's size, not by every account ever seen
    (white-box: the count of places per account is the only state it keeps)."""
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)
    for index in range(100):
        assert gate.enter(f"account{index}")
        gate.leave(f"account{index}")
    assert gate.enter("alice")
    assert dict(gate._held) == {"alice": 1}
