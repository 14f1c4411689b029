"""Submitting runs and what people do to them: approve, stop, modify, purge, delete.

Plain values in, plain values out; every method runs in the threadpool (locks,
the database) except a submission's git work, which runs in the git executor
(`repos.work.GitWork`). Each operation writes its action in the same
transaction as the change.
"""

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

from arbiter.domain.accounts import User
from arbiter.domain.errors import DomainError, NotFound, PermissionDenied, ValidationError
from arbiter.domain.files.books import BookIndex
from arbiter.domain.modify_rules import Modifiable, RunFacts, RunKind, apply_modification
from arbiter.domain.repos.reading import CodeFacts
from arbiter.domain.run_args import RunArgs, parse_run_args
from arbiter.domain.runs import code_view, contribution_totals
from arbiter.domain.runs.approval import (
    NOT_APPROVER,
    OWN_RUN,
    ApprovalPolicy,
    approve_refusal,
)
from arbiter.domain.runs.code_args import (
    CodeSource,
    code_args,
    log_refusal,
    mark_nets_tested,
    require_nets,
)
from arbiter.domain.runs.documents import build_args, new_run_id, new_run_record
from arbiter.domain.runs.outcome import finish, is_undecided, run_action
from arbiter.domain.runs.purging import (
    auto_purge_action,
    auto_purges,
    purge_into,
    purge_machine_into,
)
from arbiter.domain.runs.registry import Change, RunContext, RunState
from arbiter.domain.runs.totals import recompute
from arbiter.storage.base import NewAction
from arbiter.storage.records import RunRecord, TaskRecord, evolve


class RunLifecycle:
    def __init__(
        self,
        context: RunContext,
        code: CodeSource,
        books: BookIndex,
        approval: ApprovalPolicy | None = None,
    ) -> None:
        self._context = context
        self._code = code
        self._books = books
        self.approval = approval or ApprovalPolicy()
        # Finished runs live only in storage; changes to them are rare, one at a time.
        self._offline = threading.Lock()

    # --- submission ---

    def submit(
        self, user: User, raw: Mapping[str, object], *, rescheduled_from: str | None = None
    ) -> str:
        """Validate, read the commits, store the run (unapproved); its id. Blocks
        the caller's thread until the git thread is done: for tools and tests (the
        web layer uses `prepare` and `submit_later`, which hold no request thread).
        `rescheduled_from`: the run this one repeats, kept when that run exists."""
        args = self.prepare(user, raw)
        return self.submit_later(user, args, rescheduled_from=rescheduled_from).result()

    def prepare(self, user: User, raw: Mapping[str, object]) -> RunArgs:
        """The submission's arguments, validated (no git, no network). [THREAD]"""
        try:
            args = parse_run_args(raw, default_book=self._books.default_book())
            if not self._books.known(args.book):
                raise ValidationError(
                    "book", f"Unknown book {args.book}: neither in the catalogue nor uploaded"
                )
        except DomainError as error:
            log_refusal(user.username, str(raw.get("tests_repo", "")), error)
            raise
        return args

    def submit_later(
        self, user: User, args: RunArgs, *, rescheduled_from: str | None = None
    ) -> "Future[str]":
        """Admit the submission to the git executor now (GitBusy, TooManyGitReads
        otherwise), read and store it there; the future holds the run's id.
        Takes no lock held for I/O: callable on the event loop."""
        try:
            return self._code.work.submit(
                user.username, lambda: self._read_and_store(user, args, rescheduled_from)
            )
        except DomainError as error:
            log_refusal(user.username, args.tests_repo, error)
            raise

    def _read_and_store(self, user: User, args: RunArgs, rescheduled_from: str | None) -> str:
        """[GIT thread] The run's id; one log line when it is refused or fails."""
        try:
            facts = self._code.reader.read(args.tests_repo, args.base_tag, args.new_tag)
            return self._store(user, args, facts, rescheduled_from)
        except Exception as error:
            log_refusal(user.username, args.tests_repo, error)
            raise

    def _store(
        self, user: User, args: RunArgs, facts: CodeFacts, rescheduled_from: str | None
    ) -> str:
        spec = build_args(
            args,
            username=user.username,
            resolved_base=facts.resolved_base,
            resolved_new=facts.resolved_new,
        )
        spec = evolve(spec, **code_args(args, facts))
        now = self._context.clock()
        run = new_run_record(new_run_id(now), user.username, spec, now)
        with self._context.storage.write() as tx:
            require_nets(tx, facts)
            if rescheduled_from is not None and tx.runs.get(rescheduled_from) is not None:
                run = evolve(run, rescheduled_from=rescheduled_from)
            entry = run_action(run, "new_run", user.username, _describe(run), now)
            tx.runs.add(run)
            tx.contributions.add([contribution_totals.submitted(run)])
            code_view.save(tx, run.id, facts)
            mark_nets_tested(tx, run, facts)
            _record(tx, entry)
            tx.follows.add(user.username, run.id, now)  # one follows one's own tests
        self._context.registry.put(RunState(run, []))
        return run.id

    # --- decisions on a run ---

    def self_approval(self) -> bool:
        """Whether approvers may approve their own runs now (`ApprovalPolicy`)."""
        return self.approval.self_approval(self._context.storage)

    def approve(self, user: User, run_id: str) -> None:
        if not user.is_approver:
            raise PermissionDenied(NOT_APPROVER)
        self_approval = self.self_approval()  # read before the run's lock is taken
        with self._live(run_id) as state:
            run = state.run
            if run.username == user.username and not self_approval:
                raise PermissionDenied(OWN_RUN)
            if run.approved:
                raise ValidationError("run", "This run is already approved.")
            change = Change(evolve(run, approved=True, approver=user.username))
            change.log.append(run_action(run, "approve_run", user.username, "approved", _now(self)))
            self._context.commit(state, change)

    def stop(self, user: User, run_id: str, message: str = "User stop") -> None:
        with self._live(run_id) as state:
            _require_owner_or_approver(user, state.run)
            change = Change(state.run)
            now = _now(self)
            count = purge_into(state, change) if auto_purges(state.run) else 0
            if count:  # the run stops all the same; its result leaves the bad workers out
                change.log.append(auto_purge_action(change.run, now, count))
            finish(state, change, now=now)
            change.log[-1] = run_action(state.run, "stop_run", user.username, message, now)
            self._context.commit(state, change)

    def modify(self, user: User, run_id: str, requested: Mapping[str, object]) -> None:
        """The reference's modify rules; an undecided result re-opens a finished run."""
        with self._any(run_id) as state:
            run = state.run
            _require_owner_or_approver(user, run)
            facts = _facts(run)
            outcome = apply_modification(
                facts,
                requested,
                actor=user.username,
                is_approver=user.is_approver,
                now=datetime.fromtimestamp(_now(self), UTC),
            )
            if not outcome.changes:
                return
            values = outcome.values
            spec = evolve(
                run.args,
                num_games=values.num_games,
                priority=values.priority,
                throughput=values.throughput,
                auto_purge=values.auto_purge,
                info=values.info,
            )
            new_run = evolve(run, args=spec)
            if outcome.approval_lost:
                new_run = evolve(new_run, approved=False, approver="")
            self._commit_reopening(state, Change(new_run), user, "modify_run", _diff(outcome))

    def purge(self, user: User, run_id: str) -> int:
        """Marks the tasks of outlier workers bad; returns how many tasks were purged."""
        with self._any(run_id) as state:
            _require_owner_or_approver(user, state.run)
            if state.run.args.spsa is not None:
                raise ValidationError("run", "SPSA runs cannot be purged.")
            change = Change(state.run)
            count = purge_into(state, change)
            if count:
                message = f"purged {count} task(s)"
                self._commit_reopening(state, change, user, "purge_run", message)
            return count

    def purge_machine(self, user: User, worker_name: str) -> int:
        """An approver takes one machine's results out of every run still going
        (a quarantined machine's); how many tasks were purged."""
        if not user.is_approver:
            raise PermissionDenied("Only approvers may purge a machine's results.")
        total = 0
        for live in self._context.registry.states():
            if not any(task.worker_name == worker_name for task in live.tasks):
                continue
            with self._any(live.run.id) as state:
                change = Change(state.run)
                count = purge_machine_into(state, change, worker_name)
                if count:
                    message = f"purged {count} task(s) of {worker_name}"
                    self._commit_reopening(state, change, user, "purge_run", message)
                total += count
        return total

    def delete(self, user: User, run_id: str) -> None:
        with self._any(run_id) as state:
            _require_owner_or_approver(user, state.run)
            change = Change(state.run)
            now = _now(self)
            if not state.run.finished:
                finish(state, change, now=now)
                change.log.clear()
            change.run = evolve(change.run, deleted=True, finished=True)
            change.log.append(run_action(state.run, "delete_run", user.username, "", now))
            self._commit_any(state, change)

    # --- helpers ---

    def _commit_reopening(
        self, state: RunState, change: Change, user: User, action: str, message: str
    ) -> None:
        run = change.run
        if run.finished and not run.deleted and is_undecided(run):
            change.run = evolve(run, finished=False, is_green=False, is_yellow=False)
        change.log.append(run_action(run, action, user.username, message, _now(self)))
        self._commit_any(state, change)
        if not change.run.finished and self._context.registry.get(run.id) is None:
            self._context.registry.put(state)

    def _commit_any(self, state: RunState, change: Change) -> None:
        # On a finished run's loaded state, publishing only updates that state.
        self._context.commit(state, change)

    def _live(self, run_id: str) -> "_Guard":
        return _Guard(self, run_id, live_only=True)

    def _any(self, run_id: str) -> "_Guard":
        return _Guard(self, run_id, live_only=False)

    def load(self, run_id: str) -> RunState | None:
        with self._context.storage.read() as tx:
            run = tx.runs.get(run_id)
            tasks = tx.tasks.for_run(run_id) if run is not None else []
        return None if run is None else RunState(run, tasks)


class _Guard:
    """`with` block holding a run's lock: the in-memory state of an unfinished
    run, or (live_only=False) a state loaded from storage for a finished one."""

    def __init__(self, lifecycle: RunLifecycle, run_id: str, *, live_only: bool) -> None:
        self._lifecycle = lifecycle
        self._run_id = run_id
        self._live_only = live_only
        self._release: Callable[[], None] | None = None

    def __enter__(self) -> RunState:
        registry = self._lifecycle._context.registry
        state = registry.get(self._run_id)
        if state is not None:
            state.lock.acquire()
            if registry.get(self._run_id) is state:
                self._release = state.lock.release
                return state
            state.lock.release()
        if self._live_only:
            raise _missing_or_finished(self._lifecycle, self._run_id)
        self._lifecycle._offline.acquire()
        self._release = self._lifecycle._offline.release
        loaded = self._lifecycle.load(self._run_id)
        if loaded is None or (loaded.run.deleted):
            self._lifecycle._offline.release()
            self._release = None
            raise NotFound(f"No run {self._run_id}.")
        return loaded

    def __exit__(self, *exc: object) -> None:
        if self._release is not None:
            self._release()


def _missing_or_finished(lifecycle: RunLifecycle, run_id: str) -> Exception:
    state = lifecycle.load(run_id)
    if state is None or state.run.deleted:
        return NotFound(f"No run {run_id}.")
    return ValidationError("run", f"Run {run_id} is already finished.")


def allowed_actions(
    user: User | None, run: RunRecord, *, self_approval: bool = False
) -> frozenset[str]:
    """What `user` may do to `run` now, as the methods above decide it: for
    showing only the buttons that work (the methods still check).
    `self_approval`: what `RunLifecycle.self_approval` answers."""
    if user is None or run.deleted:
        return frozenset()
    allowed = {"reschedule"}
    if user.username == run.username or user.is_approver:
        allowed |= {"modify", "delete"}
        if run.args.spsa is None:
            allowed.add("purge")
        if not run.finished:
            allowed.add("stop")
    if approve_refusal(user, run, self_approval=self_approval) is None and not (
        run.approved or run.finished
    ):
        allowed.add("approve")
    return frozenset(allowed)


def _require_owner_or_approver(user: User, run: RunRecord) -> None:
    if user.username != run.username and not user.is_approver:
        raise PermissionDenied("Only the run's owner or an approver may do that.")


def _facts(run: RunRecord) -> RunFacts:
    spec = run.args
    kind: RunKind = "sprt" if spec.sprt else "spsa" if spec.spsa else "fixed"
    return RunFacts(
        kind=kind,
        owner=run.username,
        start_time=datetime.fromtimestamp(run.start_time, UTC),
        approved=run.approved,
        failed=run.failed,
        current=Modifiable(
            num_games=spec.num_games,
            priority=spec.priority,
            throughput=spec.throughput,
            auto_purge=spec.auto_purge,
            info=spec.info,
        ),
    )


def _diff(outcome: Any) -> str:
    return ", ".join(f"{name}: {old!r} -> {new!r}" for name, (old, new) in outcome.changes.items())


def _describe(run: RunRecord) -> str:
    spec = run.args
    rule = "SPRT" if spec.sprt else "SPSA" if spec.spsa else f"{spec.num_games} games"
    return f"{rule} {spec.new_tag} vs {spec.base_tag} at {spec.tc}"


def _record(tx: Any, entry: dict[str, Any]) -> None:
    from arbiter.domain import actions

    actions.record(tx, NewAction(**entry))


def _now(lifecycle: RunLifecycle) -> float:
    return lifecycle._context.clock()


def restore(context: RunContext, log: Callable[[str], None]) -> int:
    """Start-up: load every unfinished run, verify its aggregates against its tasks
    (log and fix any difference), finish the already-decided ones; give every
    active task a fresh lease. Returns how many runs are live."""
    from arbiter.domain.runs.outcome import is_decided
    from arbiter.domain.runs.totals import differences

    with context.storage.read() as tx:
        runs = tx.runs.unfinished()
        tasks = tx.tasks.for_runs([run.id for run in runs])
    by_run: dict[str, list[TaskRecord]] = {run.id: [] for run in runs}
    for task in tasks:
        by_run[task.run_id].append(task)
    now = context.clock()
    for run in runs:
        state = RunState(run, by_run[run.id])
        fixed = recompute(run, state.tasks)
        diffs = differences(run, fixed)
        if diffs:
            log(f"run {run.id}: aggregates differed from its tasks, fixed: {diffs}")
        context.registry.put(state, lease_from=now)
        if diffs or is_decided(fixed):
            with state.lock:
                change = Change(fixed)
                if is_decided(fixed):
                    finish(state, change, now=now)
                context.commit(state, change)
    return len(context.registry.states())
