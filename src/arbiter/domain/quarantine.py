"""Quarantine: the health rule (domain/health.py) applied to the fleet, and what
follows from it.

`MachineHealth.check` runs on the primary as a job: it reads each machine's
record on the runs changed within `window_days` (the tasks' totals and the
tasks taken back from it after it went silent), applies the rule, and for
each newly convicted machine writes its quarantine with the evidence, a
`quarantine_worker` action (the event log, so approvers see it), and takes its
open task back. The scheduler then refuses the machine, as it refuses a
blocked one, with a message that says why and where to look.

An approver releases a machine (its evidence is then set aside: those runs
never count against it again) or blocks it. Quarantine never purges results
by itself. Everything here reads and writes the database: the threadpool or
the job executor.
"""

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from arbiter.domain import actions
from arbiter.domain.accounts import User
from arbiter.domain.actions import SYSTEM_USER
from arbiter.domain.errors import NotFound, PermissionDenied
from arbiter.domain.health import (
    Finding,
    HealthRules,
    MachineRun,
    machine_findings,
    machine_records,
    verdicts,
)
from arbiter.domain.profile_fields import same_username, username_key
from arbiter.protocol.workers import owner_of, short_from_long
from arbiter.stats.purge import worker_row
from arbiter.storage import Storage, Tx
from arbiter.storage.base import MachineRunTotals, NewAction
from arbiter.storage.records import MachineHealthRecord, QuarantineRecord

DAY = 86400.0
WINDOW_DAYS = 14  # runs changed within this many days give evidence
MAX_RUNS = 1000  # the most recent of them, at most
HISTORY_RUNS = 20  # runs a machine's page shows
QUARANTINED = "quarantined"  # the webhook event
RECORDS_PER_WRITE = 250  # machines' records written in one transaction


@dataclass(frozen=True, slots=True)
class Conviction:
    worker_name: str
    evidence: list[Finding]

    def summary(self) -> str:
        return _summary([asdict(finding) for finding in self.evidence])


class MachineHealth:
    def __init__(
        self,
        storage: Storage,
        take_back: Callable[[str, str], int],
        changed: Callable[[], None],
        *,
        rules: HealthRules | None = None,
        window_days: float = WINDOW_DAYS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`take_back(machine, message)` deactivates its open task;
        `changed()` tells the scheduler's view of refused machines to reload."""
        self._storage = storage
        self._take_back = take_back
        self._changed = changed
        self._rules = rules or HealthRules()
        self._window = window_days * DAY
        self._clock = clock

    def check(self) -> list[str]:
        """Quarantine the machines the rule convicts now; their names. [job executor]"""
        now = self._clock()
        since = now - self._window
        with self._storage.read() as tx:
            run_ids = tx.runs.updated_since(since, MAX_RUNS)
            totals = tx.tasks.machine_run_totals(run_ids)
            silent = _short_counts(tx.actions.worker_run_counts("dead_task", since))
            failed = _short_counts(tx.actions.worker_run_counts("failed_task", since))
            known = {record.worker_name: record for record in tx.quarantine.all()}
        runs = _by_run(totals, silent, failed)
        findings = [
            (name, finding)
            for name, finding in machine_findings(runs, self._rules)
            if finding.run_id not in _dismissed(known.get(name))
        ]
        self._keep_records(machine_records(runs, findings, self._rules), now)
        convicted = [
            Conviction(name, evidence)
            for name, evidence in verdicts(findings, self._rules).items()
            if not (name in known and known[name].active)
        ]
        for conviction in convicted:
            self._quarantine(conviction, known.get(conviction.worker_name), now)
        return [conviction.worker_name for conviction in convicted]

    def _keep_records(self, records: dict[str, dict[str, Any]], now: float) -> None:
        """Every machine's record of now in place of the last check's, a few
        hundred rows a transaction: on SQLite a write holds the one write lock,
        and the results thread's commits wait for it (10,000 rows at once held
        it about 0.25 s)."""
        rows = [
            MachineHealthRecord(name, username_key(owner_of(name)), now, record)
            for name, record in records.items()
        ]
        for start in range(0, len(rows), RECORDS_PER_WRITE):
            with self._storage.write() as tx:
                tx.machine_health.put_many(rows[start : start + RECORDS_PER_WRITE])
        with self._storage.write() as tx:
            tx.machine_health.delete_checked_before(now)

    def _quarantine(
        self, conviction: Conviction, before: QuarantineRecord | None, now: float
    ) -> None:
        evidence = [asdict(finding) for finding in conviction.evidence]
        record = QuarantineRecord(
            conviction.worker_name,
            True,
            now,
            evidence,
            before.dismissed if before else [],
        )
        message = f"quarantined: {conviction.summary()}"
        with self._storage.write() as tx:
            tx.quarantine.put(record)
            action_id = _log(tx, SYSTEM_USER, conviction.worker_name, message, now)
            # The webhooks' outbox, in the same transaction (domain/webhooks.py).
            tx.run_events.add(
                time=now,
                event=QUARANTINED,
                run_id="",
                worker=conviction.worker_name,
                action_id=action_id,
            )
        self._changed()  # refused from now on: the task taken back is its last
        self._take_back(conviction.worker_name, message)

    def release(self, approver: User, worker_name: str) -> None:
        """Lift the quarantine; its evidence never counts against the machine again."""
        if not approver.is_approver:
            raise PermissionDenied("Only approvers may release a quarantined machine.")
        now = self._clock()
        with self._storage.write() as tx:
            record = tx.quarantine.get(worker_name)
            if record is None or not record.active:
                raise NotFound(f"{worker_name} is not quarantined.")
            dismissed = sorted({*record.dismissed, *(f["run_id"] for f in record.evidence)})
            released = replace(
                record,
                active=False,
                dismissed=dismissed,
                released_by=approver.username,
                released_at=now,
            )
            tx.quarantine.put(released)
            _log(tx, approver.username, worker_name, "released", now)
        self._changed()

    def queue(self) -> list[QuarantineRecord]:
        """The quarantines in force, newest first, with their evidence."""
        with self._storage.read() as tx:
            return tx.quarantine.active()

    def of_owner(self, username: str) -> list[QuarantineRecord]:
        """The quarantines in force of this account's machines (its health, as
        its owner sees it on the profile)."""
        return [r for r in self.queue() if same_username(owner_of(r.worker_name), username)]

    def since(self, since: float) -> list[QuarantineRecord]:
        """The quarantines in force that began after `since` (the approvers'
        browser notifications)."""
        return [record for record in self.queue() if record.since > since]

    def health_of(self, worker_name: str) -> MachineHealthRecord | None:
        """The machine's record as the last check found it (None: not seen within the window)."""
        with self._storage.read() as tx:
            return tx.machine_health.get(worker_name)

    def health_of_owner(self, username: str) -> list[MachineHealthRecord]:
        """The records of the account's machines, as the last check found them."""
        with self._storage.read() as tx:
            return tx.machine_health.of_user(username_key(username))

    def record_of(self, worker_name: str) -> QuarantineRecord | None:
        with self._storage.read() as tx:
            return tx.quarantine.get(worker_name)

    def history(self, worker_name: str, limit: int = HISTORY_RUNS) -> list[MachineRunTotals]:
        """The machine's latest runs, its tasks on each summed: its health over time."""
        with self._storage.read() as tx:
            return tx.tasks.machine_history(worker_name, limit)


def quarantined_messages(tx: Tx) -> dict[str, str]:
    """What the scheduler tells each quarantined machine, by name."""
    return {
        record.worker_name: (
            f"quarantined by the health check ({_summary(record.evidence)});"
            " an approver may release it"
        )
        for record in tx.quarantine.active()
    }


def reason(record: QuarantineRecord) -> str:
    """`crashes, residual on 3 runs`: why the machine is quarantined."""
    return _summary(record.evidence)


def _summary(evidence: Sequence[Mapping[str, str]]) -> str:
    """`crashes, residual on 3 runs`: the kinds of the evidence and its runs."""
    kinds = sorted({finding["kind"] for finding in evidence})
    runs = len({finding["run_id"] for finding in evidence})
    return f"{', '.join(kinds)} on {runs} run{'s' if runs != 1 else ''}"


def _log(tx: Tx, by: str, worker_name: str, message: str, now: float) -> int:
    """A quarantine or a release, in the event log; the action's id."""
    entry = NewAction(
        time=now, action="quarantine_worker", username=by, worker=worker_name, message=message
    )
    return actions.record(tx, entry)


def _dismissed(record: QuarantineRecord | None) -> set[str]:
    return set(record.dismissed) if record else set()


def _short_counts(by_worker: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """Counts of a task action by (short machine name, run): the log names the long name."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for (worker, run_id), count in by_worker.items():
        counts[short_from_long(worker), run_id] += count
    return counts


def _by_run(
    totals: Sequence[MachineRunTotals],
    silent: dict[tuple[str, str], int],
    failed: dict[tuple[str, str], int],
) -> dict[str, list[MachineRun]]:
    runs: dict[str, list[MachineRun]] = defaultdict(list)
    for t in totals:
        # The χ² rows of the run page's residuals (every machine here has pairs).
        rows = worker_row(0, 0, 0, t.pentanomial)
        runs[t.run_id].append(
            MachineRun(
                t.worker_name,
                t.run_id,
                t.author,
                t.games,
                t.crashes,
                t.time_losses,
                rows,
                t.tasks,
                silent.get((t.worker_name, t.run_id), 0),
                t.nps,
                t.game_nps,
                failed.get((t.worker_name, t.run_id), 0),
            )
        )
    return runs
