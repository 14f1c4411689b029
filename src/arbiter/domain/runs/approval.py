"""Who may approve a run, and why someone may not (the run page says it).

The reference refuses self-approval. So does Arbiter, except where nobody else
could ever approve: an instance with a single active approver (the first-use
flow with one account), or one whose operator allows it
(`ARBITER_ALLOW_SELF_APPROVAL`). Runs in the threadpool (one small read).
"""

from dataclasses import dataclass

from arbiter.domain.accounts import User
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord

OWN_RUN = "You cannot approve your own run."
NOT_APPROVER = "Only approvers may approve runs."


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    allow_self: bool = False  # the operator's setting

    def self_approval(self, storage: Storage) -> bool:
        """Whether an approver may approve their own runs now."""
        return self.allow_self or active_approvers(storage) == 1


def active_approvers(storage: Storage) -> int:
    with storage.read() as tx:
        accounts = tx.users.list(pending=False, blocked=False)
    return sum(1 for account in accounts if account.is_approver)


def approve_refusal(user: User | None, run: RunRecord, *, self_approval: bool) -> str | None:
    """Why `user` may not approve `run` now; None when they may, or when there is
    nothing to approve (the run is approved, finished or deleted)."""
    if run.approved or run.finished or run.deleted:
        return None
    if user is None:
        return "Waiting for an approver. Log in as an approver to approve it."
    if not user.is_approver:
        return "Waiting for an approver: only approvers may approve runs."
    if user.username == run.username and not self_approval:
        return (
            "Waiting for another approver: you cannot approve your own run"
            " (an operator may allow it with ARBITER_ALLOW_SELF_APPROVAL=1)."
        )
    return None
