"""Sharded plans measured against their prediction: the re-execution protocol for FSDP2.

One case = a model, batch size, world size and network (loopback, or the emulated cluster
at a ``tc`` rate). Each planner's :class:`~gradsched.plan_sharded.ShardedPlan` is made from
the committed compute trace and the network's committed gloo sweep, predicted by the
sharded replay in *blocking* semantics (FSDP2 on gloo: the host waits for every
collective, :mod:`gradsched.replay.sharded`), and run with stock FSDP2
(:func:`gradsched.runtime.fsdp2.run_plans`: every plan in each of ``rounds`` rounds, in a
seeded random order, a fresh model each time, ``warmup`` untimed and ``iters`` timed
iterations; the slowest rank's period). Reported per plan: the median, p10 and p90 of the
pooled iterations, the prediction and its error, and the speedup over FSDP2's defaults
(ratio of medians) with a percentile bootstrap interval
(:func:`gradsched.experiments.bootstrap.bootstrap_ratio`).

The compute trace holds one uncontended rank's thread times; nothing here corrects them for
contention (the all-reduce re-execution's interference calibration is for its executor),
so the prediction is the raw replay and its error is reported as it is.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.experiments.bootstrap import bootstrap_ratio
from gradsched.experiments.sharded import OPTIMUM, optimum
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import replay_sharded
from gradsched.runtime.fsdp2 import run_plans
from gradsched.traces.bundle import ComputeTrace

BASELINE = "fsdp2"


@dataclass(frozen=True)
class ShardedCase:
    """What one measurement runs."""

    model: str
    batch_size: int
    world_size: int
    network: str  # loopback or an emulated-cluster network key
    cluster: str | None  # the tc rate of the emulated cluster, None on loopback
    seq_len: int | None = None


def plans_for(trace: ComputeTrace, model: CommModel, world_size: int,
              algorithms: Sequence[str], memory_cap_bytes: float | None) -> list[ShardedPlan]:
    """Each algorithm's plan (the optimum in blocking semantics, as the run executes)."""
    if BASELINE not in algorithms:
        raise ConfigError(f"the measured plans must include {BASELINE} (the baseline)")
    out = []
    for name in algorithms:
        if name == OPTIMUM:
            out.append(optimum(trace, model, world_size, semantics="blocking",
                               memory_cap_bytes=memory_cap_bytes).plan)
        else:
            out.append(make_sharded_plan(name, trace, model, world_size))
    return out


def measure(case: ShardedCase, trace: ComputeTrace, model: CommModel,
            algorithms: Sequence[str], *, rounds: int, iters: int, warmup: int,
            memory_cap_bytes: float | None = None, seed: int = 0,
            timeout_s: float = 600.0) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                list[ShardedPlan]]:
    """Plan, predict and run; returns (one row per plan, one row per timed iteration, the
    plans)."""
    plans = plans_for(trace, model, case.world_size, algorithms, memory_cap_bytes)
    times, groups = run_plans(plans, model=case.model, batch_size=case.batch_size,
                              world_size=case.world_size, rounds=rounds, iters=iters,
                              warmup=warmup, cluster=case.cluster, seq_len=case.seq_len,
                              seed=seed, timeout_s=timeout_s)
    base = times[list(algorithms).index(BASELINE)]
    rows, iterations = [], []
    for name, plan, measured, grouped in zip(algorithms, plans, times, groups, strict=True):
        predicted = replay_sharded(trace, plan, model, case.world_size, semantics="blocking")
        point, low, high = bootstrap_ratio(base, measured, seed=seed)
        median = statistics.median(measured)
        rows.append({
            "model": case.model, "batch_size": case.batch_size, "world_size": case.world_size,
            "network": case.network, "algorithm": name, "n_units": plan.n_units,
            "reshard_after_forward": all(u.reshard_after_forward for u in plan.units),
            "forward_prefetch": plan.forward_prefetch,
            "backward_prefetch": plan.backward_prefetch,
            "units_match": grouped == [sorted(u.tensors) for u in plan.units],
            "predicted_s": predicted.iteration_s,
            "predicted_peak_bytes": predicted.gathered_peak_bytes,
            "measured_s": median, "measured_p10_s": float(np.percentile(measured, 10)),
            "measured_p90_s": float(np.percentile(measured, 90)), "iters": len(measured),
            "error_pct": 100.0 * (predicted.iteration_s / median - 1.0),
            "speedup_vs_fsdp2": point, "speedup_low": low, "speedup_high": high})
        iterations += [{"model": case.model, "network": case.network,
                        "world_size": case.world_size, "algorithm": name, "iteration": i,
                        "iteration_s": t} for i, t in enumerate(measured)]
    return rows, iterations, plans
