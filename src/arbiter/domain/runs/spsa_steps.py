"""SPSA on the server (reference 6): hand out perturbations, apply reported results.

`request_spsa` draws one ±1 flip per parameter and stores it on the task
(single use); the result of that batch moves every θ along its flip. The
stored flips are checked against the signature the worker echoes, so a
result can never be applied with someone else's perturbation.
"""

import random
from dataclasses import asdict
from typing import Any

from arbiter.protocol.messages import SpsaResult
from arbiter.stats.spsa import (
    SpsaParam,
    SpsaSchedule,
    SpsaState,
    draw_flips,
    engine_values,
    flips_signature,
    gains,
    history_due,
    history_sample,
    pack_flips,
    unpack_flips,
    update_thetas,
)
from arbiter.storage.records import RunRecord, TaskRecord, evolve

_random = random.SystemRandom()


def schedule_of(spsa: SpsaState) -> SpsaSchedule:
    return SpsaSchedule(
        float(spsa["A"]), float(spsa["alpha"]), float(spsa["gamma"]), int(spsa["num_iter"])
    )


def params_of(spsa: SpsaState) -> list[SpsaParam]:
    return [SpsaParam(**param) for param in spsa["params"]]


def tuning_of(run: RunRecord) -> SpsaState:
    """The run's SPSA state; callers have checked that it is an SPSA run."""
    if run.args.spsa is None:
        raise ValueError(f"run {run.id} is not an SPSA run")
    return run.args.spsa


def perturbation(run: RunRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """(reply body of request_spsa, the task's new `spsa_params`)."""
    spsa = tuning_of(run)
    params, schedule = params_of(spsa), schedule_of(spsa)
    k = int(spsa["iter"])
    flips = draw_flips(len(params), _random)
    white, black = engine_values(params, flips, k, schedule)
    w_params = []
    for param, value, flip in zip(params, white, flips, strict=True):
        c_k, r_k = gains(param, k, schedule)
        w_params.append({"name": param.name, "value": value, "R": r_k, "c": c_k, "flip": flip})
    b_params = [{"name": p.name, "value": v} for p, v in zip(params, black, strict=True)]
    packed = pack_flips(flips)
    reply = {"w_params": w_params, "b_params": b_params, "sig": flips_signature(packed)}
    return reply, {"iter": k, "packed_flips": packed.hex()}


def apply_spsa_result(
    run: RunRecord, old: TaskRecord, new: TaskRecord, result: SpsaResult
) -> tuple[RunRecord, TaskRecord]:
    """The run and task after one SPSA batch; unchanged (but the flips spent) when
    the batch does not match what was handed out."""
    stored = old.spsa_params
    spent = evolve(new, spsa_params=None)
    batch_games = (new.wins + new.losses + new.draws) - (old.wins + old.losses + old.draws)
    if stored is None or result.num_games != batch_games:
        return run, spent
    packed = bytes.fromhex(stored["packed_flips"])
    if flips_signature(packed) != result.sig:
        return run, spent
    spsa = tuning_of(run)
    params, schedule = params_of(spsa), schedule_of(spsa)
    k = int(stored["iter"])
    flips = unpack_flips(packed, len(params))
    moved = update_thetas(params, flips, k, result.wins - result.losses, schedule)
    iteration = int(spsa["iter"]) + result.num_games // 2
    history = list(spsa.get("param_history", []))
    if history_due(len(history), iteration, schedule.num_iter, len(moved)):
        history.append(history_sample(moved, iteration, schedule))
    new_spsa: SpsaState = {
        **spsa,
        "iter": iteration,
        "params": [asdict(p) for p in moved],
        "param_history": history,
    }
    return evolve(run, args=evolve(run.args, spsa=new_spsa)), spent
