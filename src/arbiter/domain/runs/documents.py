"""Runs as documents: a new run's `args` from a validated submission, and the
wire views the API serves (the reference's shapes)."""

import hashlib
import math
import os
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from arbiter.domain.run_args import RunArgs, option_value
from arbiter.domain.runs.totals import NO_AGGREGATES
from arbiter.stats.scheduling import tc_ratio
from arbiter.stats.sprt import new_sprt
from arbiter.stats.spsa import SpsaParam, SpsaState
from arbiter.storage.records import RunRecord, TaskRecord, evolve
from arbiter.storage.run_spec import RunSpec, spec_document

# The reference's run schema version (its RUN_VERSION): the run documents we
# serve have that shape, and clients may look at `version` to know it.
RUN_VERSION = 24
DEFAULT_HASH_MIB = 16  # an engine's Hash when the options do not set one


def new_run_id(now: float) -> str:
    """24 hex digits, time first like a MongoDB ObjectId: ids sort by creation."""
    return f"{int(now):08x}{os.urandom(8).hex()}"


def run_label(run_id: str, new_tag: str) -> str:
    """The reference's short run name in actions: `<new_tag[:23]>-<md5(id)[:7]>`."""
    return f"{new_tag[:23]}-{hashlib.md5(run_id.encode()).hexdigest()[:7]}"  # noqa: S324 - a label


def build_args(args: RunArgs, *, username: str, resolved_base: str, resolved_new: str) -> RunSpec:
    """The spec of a new run: the submission plus derived state."""
    spec = RunSpec(
        base_tag=args.base_tag,
        new_tag=args.new_tag,
        num_games=args.num_games,
        tc=args.tc,
        new_tc=args.new_tc,
        book=args.book,
        book_depth=args.book_depth,
        threads=args.threads,
        resolved_base=resolved_base,
        resolved_new=resolved_new,
        base_options=args.base_options,
        new_options=args.new_options,
        info=args.info,
        base_signature=args.base_signature,
        new_signature=args.new_signature,
        username=username,
        tests_repo=args.tests_repo,
        auto_purge=args.auto_purge,
        throughput=args.throughput,
        priority=args.priority,
        adjudication=args.adjudication,
        arch_filter=args.arch_filter,
        compiler=args.compiler,
        # Derived once from arch_filter: the scheduler never runs a user's regex.
        allowed_archs=None if args.allowed_archs is None else sorted(args.allowed_archs),
    )
    if args.sprt is not None:
        # The reference's batch (about 32 STC games), unless the submission chose one.
        batch = args.sprt.batch_size or max(1, int(0.5 + 16.0 / scheduling_ratio(spec)))
        sprt = new_sprt(
            args.sprt.alpha,
            args.sprt.beta,
            args.sprt.elo0,
            args.sprt.elo1,
            elo_model=args.sprt.elo_model,
            batch_size=batch,
        )
        spec = evolve(spec, sprt=sprt)
    if args.spsa is not None:
        schedule = args.spsa.schedule
        spsa = SpsaState(
            A=schedule.big_a,
            alpha=args.spsa.alpha,
            gamma=args.spsa.gamma,
            raw_params=args.spsa.raw_params,
            iter=0,
            num_iter=schedule.num_iter,
            params=[param_document(p) for p in args.spsa.params],
            param_history=[],
        )
        spec = evolve(spec, spsa=spsa)
    return spec


def param_document(param: SpsaParam) -> dict[str, Any]:
    return asdict(param)


def scheduling_ratio(spec: RunSpec) -> float:
    """tc_ratio of the run (game length × threads relative to 10+0.1)."""
    from arbiter.domain.time_control import parse_time_control

    tc = parse_time_control(spec.tc).scheduling_tc()
    return tc_ratio(tc, spec.threads)


def tc_base(tc: str) -> float:
    """The leading number of the time control (LTC from 40 on); 0 for fixed nodes."""
    head = tc.partition("+")[0].rpartition("/")[2]
    try:
        return float(head)
    except ValueError:
        return 0.0


def new_run_record(run_id: str, username: str, args: RunSpec, now: float) -> RunRecord:
    return RunRecord(
        id=run_id,
        version=RUN_VERSION,
        username=username,
        start_time=now,
        last_updated=now,
        tc_base=tc_base(args.tc),
        rescheduled_from=None,
        approved=False,
        approver="",
        finished=False,
        deleted=False,
        failed=False,
        failures=0,
        is_green=False,
        is_yellow=False,
        **NO_AGGREGATES,
        nps=0.0,
        games_per_minute=0.0,
        args=args,
    )


def hash_mib(options: str) -> int:
    """The Hash option in MiB (the engine's default when the options do not set it)."""
    value = option_value(options, "Hash")
    try:
        return int(value) if value is not None else DEFAULT_HASH_MIB
    except ValueError:
        return DEFAULT_HASH_MIB


# ---------------------------------------------------------------- wire views


def results_view(record: RunRecord | TaskRecord) -> dict[str, Any]:
    return {
        "wins": record.wins,
        "losses": record.losses,
        "draws": record.draws,
        "crashes": record.crashes,
        "time_losses": record.time_losses,
        "pentanomial": list(record.pentanomial),
    }


# Keys the reference's args carry only when set: a spec holds them empty when
# unset, which the reference's clients would read as a value (no compiler is
# called ""). An imported run may carry `master_repo` the same way.
ONLY_WHEN_SET = ("arch_filter", "compiler", "master_repo")


def wire_args(spec: RunSpec, *, spsa_history: bool = False) -> dict[str, Any]:
    """A run's args as the API shows them: the reference's shape, without
    Arbiter's own `allowed_archs`; SPSA's parameter history only on request."""
    shown = spec_document(spec)
    del shown["allowed_archs"]
    for key in ONLY_WHEN_SET:
        if key in shown and shown[key] in ("", None):
            del shown[key]
    if spec.spsa is not None and not spsa_history:
        shown["spsa"] = {**spec.spsa, "param_history": []}
    return shown


def run_view(run: RunRecord, *, history: bool = False) -> dict[str, Any]:
    """A run as `/api/get_run` and `/api/active_runs` show it (tasks left out)."""
    args = wire_args(run.args, spsa_history=history)
    view: dict[str, Any] = {
        "_id": run.id,
        "version": RUN_VERSION,  # the shape served, whatever the run was stored under
        "start_time": _iso(run.start_time),
        "last_updated": _iso(run.last_updated),
        "tc_base": run.tc_base,
        "approved": run.approved,
        "approver": run.approver,
        "finished": run.finished,
        "deleted": run.deleted,
        "failed": run.failed,
        "failures": run.failures,
        "is_green": run.is_green,
        "is_yellow": run.is_yellow,
        "workers": run.workers,
        "cores": run.cores,
        "committed_games": run.committed_games,
        "total_games": run.total_games,
        "results": results_view(run),
        "nps": run.nps,
        "games_per_minute": run.games_per_minute,
        "args": args,
        "tasks": [],
        "bad_tasks": [],
    }
    if run.rescheduled_from is not None:  # the reference has the key only then
        view["rescheduled_from"] = run.rescheduled_from
    return view


def task_view(task: TaskRecord) -> dict[str, Any]:
    """One task as `/api/get_task` shows it: worker identity partly masked."""
    info = dict(task.worker_info)
    info["unique_key"] = task.unique_key[:8] + "..."
    info["remote_addr"] = "?.?.?.?"
    residual: float | str | None = task.residual
    if task.residual is not None and math.isinf(task.residual):
        residual = "inf"
    view: dict[str, Any] = {
        "task_id": task.task_id,
        "num_games": task.num_games,
        "active": task.active,
        "last_updated": _iso(task.last_updated),
        "start": task.start,
        "stats": results_view(task),
        "worker_info": info,
        "residual": residual,
    }
    if task.bad:
        view["bad"] = True
    if task.spsa_params is not None:  # JSON has no bytes: the flips as byte values
        flips = bytes.fromhex(task.spsa_params["packed_flips"])
        view["spsa_params"] = {"iter": task.spsa_params["iter"], "packed_flips": list(flips)}
    return view


def _iso(timestamp: float) -> str:
    """As the reference prints its times: str() of an aware UTC datetime."""
    return str(datetime.fromtimestamp(timestamp, UTC))
