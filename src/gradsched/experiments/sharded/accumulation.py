"""The accumulation-mode advisor: for one sharded plan and ``k`` micro-batches per optimizer
step, FSDP2's ways to accumulate gradients side by side, each replayed
(:mod:`gradsched.replay.sharded_accum`, :mod:`gradsched.replay.sharded`):

* ``no-sync``: ``set_requires_gradient_sync(False)`` on the first ``k - 1`` micro-batches;
* ``no-sync-keep``: the same and ``set_reshard_after_backward(False)``: the parameters also
  stay gathered between micro-batches (the plan's ``keep_unsharded_between_microbatches``);
  only for ``k > 1``;
* ``sync-every``: FSDP2's default, a reduce-scatter per unit and micro-batch.

* ``no-all-reduce``: HSDP only (a plan whose mesh has replicas):
  ``set_requires_all_reduce(False)`` on micro-batches 1..k-1: a reduce-scatter within the
  shard group every micro-batch, one all-reduce among the replicas per step, the
  reduce-scattered shards held between micro-batches (``partial_grad_bytes``).

A plan with an HSDP mesh is replayed on a cluster (:class:`~gradsched.costmodel.mesh.
GroupPricer`: shard-group collectives and replicate-group all-reduces priced apart,
:func:`gradsched.replay.sharded_accum.replay_mode_mesh`); every mode, ``sync-every``
included, then all-reduces too. Without replicas ``no-all-reduce`` has nothing to skip and
is named in :data:`NOT_PRICED`.

Per mode: the step time, the collectives of a step by kind (and by kind and group size,
``collectives``), the replay's peak of gathered parameters and unsharded gradients
(activations and optimizer state are not in the trace; the shards, ``resident_bytes``, and
the not-yet-all-reduced shards, ``partial_grad_bytes``, beside), the peak above
``sync-every``'s and the step time over the fastest mode's. :func:`advice` names the
fastest mode whose peak fits a cap.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradsched.costmodel.mesh import GroupPricer
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded_accum import ModeReplay, replay_mode, replay_mode_mesh

DEFAULT_MODE = "sync-every"
"""FSDP2's default mode: no call needed."""

CALLS = {
    "no-sync": "set_requires_gradient_sync(False) on micro-batches 1..k-1",
    "no-sync-keep": "set_requires_gradient_sync(False) and set_reshard_after_backward(False) "
                    "on micro-batches 1..k-1",
    "no-all-reduce": "set_requires_all_reduce(False) on micro-batches 1..k-1",
    "sync-every": "nothing (FSDP2's default)",
}
"""What a user calls for each mode (``FSDPModule`` methods, every unit)."""
NOT_PRICED = ("no-all-reduce: set_requires_all_reduce(False) needs HSDP's replicate "
              "dimension (plain FSDP2 has no all-reduce to skip; give the mesh, --mesh RxS)")


def is_hsdp(plan: ShardedPlan) -> bool:
    """Whether ``plan``'s mesh has replicas (HSDP)."""
    return plan.mesh is not None and plan.mesh.is_hsdp


def _replay(problem: ShardedProblem, plan: ShardedPlan, mode: str,
            pricer: GroupPricer | None) -> ModeReplay:
    """``mode``'s step of ``plan``: on its mesh over ``pricer`` for HSDP, else plain."""
    if is_hsdp(plan):
        if pricer is None:
            raise ConfigError(f"sharded plan '{plan.algorithm}' has an HSDP mesh: its "
                              "accumulation modes need a cluster to price its groups on")
        return replay_mode_mesh(problem.trace, plan, pricer, mode,
                                grad_accum=problem.grad_accum, semantics=problem.semantics)
    return replay_mode(problem.trace, plan, problem.model, problem.world_size, mode,
                       grad_accum=problem.grad_accum, semantics=problem.semantics)


def accumulation_rows(problem: ShardedProblem, plan: ShardedPlan,
                      pricer: GroupPricer | None = None) -> list[dict[str, Any]]:
    """One row per priced mode (module docstring) for ``plan`` under ``problem``'s world
    size, semantics and ``grad_accum``; an HSDP plan's on ``pricer``'s cluster."""
    k = problem.grad_accum
    names = ["no-sync", *(["no-all-reduce"] if is_hsdp(plan) else []), "sync-every"]
    modes = [_replay(problem, plan, mode, pricer) for mode in names]
    if k > 1:
        kept = replace(plan, keep_unsharded_between_microbatches=True)
        modes.insert(1, replace(_replay(problem, kept, "no-sync", pricer), mode="no-sync-keep"))
    base = next(m for m in modes if m.mode == "sync-every").replay.gathered_peak_bytes
    fastest = min(m.replay.iteration_s for m in modes)
    cap = problem.memory_cap_bytes
    mesh = plan.mesh
    rows = []
    for m in modes:
        row = {"algorithm": plan.algorithm, "n_units": plan.n_units,
               "world_size": problem.world_size,
               "replicate": mesh.replicate if mesh is not None else 1,
               "shard": mesh.shard if mesh is not None else problem.world_size,
               "semantics": problem.semantics,
               **m.to_dict(), "fsdp2_calls": CALLS[m.mode],
               "extra_peak_bytes": m.replay.gathered_peak_bytes - base,
               "step_over_fastest": m.replay.iteration_s / fastest}
        if cap is not None:
            row["fits_cap"] = bool(m.replay.gathered_peak_bytes <= cap)
        rows.append(row)
    return rows


def advice(rows: list[dict[str, Any]], margin_pct: float | None = None) -> str:
    """The fastest mode whose peak fits the cap (every mode when no cap), in words.

    With ``margin_pct`` (the comm model's error, applied to the whole step, which overstates
    it: compute is not uncertain here), modes whose step is within that margin of the fastest
    are not told apart, and the one with the smallest peak among them is named."""
    if all(r["grad_accum"] == 1 for r in rows):
        return "one micro-batch per step: the modes run the same step"
    fitting = [r for r in rows if r.get("fits_cap", True)]
    if not fitting:
        smallest = min(rows, key=lambda r: r["gathered_peak_bytes"])
        return (f"no mode fits the memory cap: the smallest peak is {smallest['mode']}'s "
                f"({smallest['gathered_peak_bytes'] / 2**20:.4g} MiB)")
    best = min(fitting, key=lambda r: (r["step_s"], r["gathered_peak_bytes"]))
    if margin_pct is not None:
        bound = best["step_s"] * (1.0 + margin_pct / 100.0)
        close = [r for r in fitting if r["step_s"] <= bound]
        if len(close) > 1:
            peak = min(r["gathered_peak_bytes"] for r in close)
            leanest = [r for r in close if r["gathered_peak_bytes"] == peak]
            # equal peaks are a tie: FSDP2's default (nothing to call) is named among them
            least = min(leanest, key=lambda r: (r["mode"] != DEFAULT_MODE, r["step_s"]))
            others = [r["mode"] for r in leanest if r is not least]
            tied = f" (tied on memory with {', '.join(others)})" if others else ""
            return (f"within the comm model's margin ({margin_pct:.3g} % of the step) of the "
                    f"fastest: {', '.join(r['mode'] for r in close)}, not told apart; the "
                    f"least memory among them: {least['mode']}{tied} ({least['step_s']:.4g} s "
                    f"per step, peak {least['gathered_peak_bytes'] / 2**20:.4g} MiB): "
                    f"{least['fsdp2_calls']}")
    return (f"fastest{' within the cap' if 'fits_cap' in best else ''}: {best['mode']} "
            f"({best['step_s']:.4g} s per step, peak {best['gathered_peak_bytes'] / 2**20:.4g}"
            f" MiB): {best['fsdp2_calls']}")
