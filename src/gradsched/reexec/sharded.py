"""Sharded plans measured against their prediction: the re-execution protocol for FSDP2.

One case = a model, batch size, world size and network (loopback, or the emulated cluster
at a ``tc`` rate). Each planner's :class:`~gradsched.plan_sharded.ShardedPlan` is made from
the committed compute trace and the network's committed gloo sweep, predicted by the
sharded replay in *blocking* semantics (FSDP2 on gloo: the host waits for every
collective, :mod:`gradsched.replay.sharded`), and run with stock FSDP2
(:func:`gradsched.runtime.fsdp2.measure_plans`: every plan in each of ``rounds`` rounds, in a
seeded random order, a fresh model each time, ``warmup`` untimed and ``iters`` timed
iterations; the slowest rank's period). Reported per plan: the median, p10 and p90 of the
pooled iterations, the prediction and its error, and the speedup over FSDP2's defaults
(ratio of medians) with a percentile bootstrap interval
(:func:`gradsched.experiments.bootstrap.bootstrap_ratio`).

The prediction follows the all-reduce re-execution (:mod:`gradsched.reexec.predict`): the
same launch also runs the *compute-only control* (every rank trains the model without
FSDP2 and without communication, in the same rounds), the compute trace is scaled so that
its forward, backward and update sum to the control's median (``compute_scale``), and the
sharded replay runs on the scaled trace. The committed compute traces were captured on
another day and machine instance, one rank alone, so their times need not be this
machine's; the unscaled replay is kept as ``predicted_raw_s``. The executor's interference
calibration is not applied (it was fitted for the all-reduce executor, not for FSDP2).

Besides the planners (:data:`gradsched.planners.sharded.SHARDED_PLANNERS`, among them
``fsdp2-noreshard``: FSDP2's default units with ``reshard_after_forward=False``) and the
optimum (``--memory-cap`` or none), one item: :data:`OPTIMUM_CAPPED`, the optimum under a
cap equal to the predicted peak of FSDP2's default plan (``predicted_peak_bytes`` of
``fsdp2``), i.e. no more gathered memory than the baseline. Speed-ups are also given over
``fsdp2-noreshard`` when it runs (:data:`NO_RESHARD`).

**Memory.** Each plan's ``predicted_peak_bytes`` is the replay's peak of gathered
parameters and gradients; ``measured_peak_bytes`` is one extra, untimed iteration's peak
of CPU tensor storage allocated during the iteration (activations included; the largest
over ranks and rounds, :mod:`gradsched.runtime.cpu_memory`); ``compute_only_peak_bytes``
is the same for the control (no FSDP2: activations and full gradients).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.experiments.bootstrap import bootstrap_ratio
from gradsched.experiments.sharded import OPTIMUM, optimum
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import make_sharded_plan
from gradsched.reexec.predict import scaled_trace, trace_compute_s
from gradsched.replay.sharded import replay_sharded
from gradsched.runtime.fsdp2 import COMPUTE_ONLY, measure_plans
from gradsched.traces.bundle import ComputeTrace

BASELINE = "fsdp2"
NO_RESHARD = "fsdp2-noreshard"
OPTIMUM_CAPPED = "sharded-optimum-capped"
"""The optimum under a memory cap equal to the baseline's predicted peak."""


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
        elif name == OPTIMUM_CAPPED:
            out.append(capped_optimum(trace, model, world_size))
        else:
            out.append(make_sharded_plan(name, trace, model, world_size))
    return out


def capped_optimum(trace: ComputeTrace, model: CommModel, world_size: int) -> ShardedPlan:
    """The optimum (blocking) under a cap of the baseline's predicted peak of gathered
    parameters and gradients (the peak does not depend on the compute scale: in blocking
    semantics the events' order is the program's)."""
    base = make_sharded_plan(BASELINE, trace, model, world_size)
    cap = replay_sharded(trace, base, model, world_size, semantics="blocking")
    plan = optimum(trace, model, world_size, semantics="blocking",
                   memory_cap_bytes=cap.gathered_peak_bytes).plan
    return replace(plan, algorithm=OPTIMUM_CAPPED,
                   info={**plan.info, "memory_cap": f"{BASELINE}'s predicted peak"})


def measure(case: ShardedCase, trace: ComputeTrace, model: CommModel,
            algorithms: Sequence[str], *, rounds: int, iters: int, warmup: int,
            memory_cap_bytes: float | None = None, seed: int = 0,
            timeout_s: float = 600.0) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                list[ShardedPlan]]:
    """Plan, run (with the compute-only control) and predict; returns (one row per plan,
    one row per timed iteration, the plans)."""
    plans = plans_for(trace, model, case.world_size, algorithms, memory_cap_bytes)
    runs = measure_plans([*plans, COMPUTE_ONLY], model=case.model,
                         batch_size=case.batch_size, world_size=case.world_size,
                         rounds=rounds, iters=iters, warmup=warmup, cluster=case.cluster,
                         seq_len=case.seq_len, seed=seed, timeout_s=timeout_s, memory=True)
    times = runs.times_s
    control = times[-1]
    scale = statistics.median(control) / trace_compute_s(trace)
    scaled = scaled_trace(trace, scale)
    names = list(algorithms)
    bases = {"fsdp2": times[names.index(BASELINE)],
             "noreshard": times[names.index(NO_RESHARD)] if NO_RESHARD in names else None}
    rows = [_row(case, name, plan, measured, grouped, bases, seed,
                 raw=replay_sharded(trace, plan, model, case.world_size, semantics="blocking"),
                 scaled=replay_sharded(scaled, plan, model, case.world_size,
                                       semantics="blocking"),
                 scale=scale, control=control,
                 peaks=(peak, runs.peak_bytes[-1]))
            for name, plan, measured, grouped, peak in zip(
                algorithms, plans, times[:-1], runs.groups[:-1], runs.peak_bytes[:-1],
                strict=True)]
    iterations = [{"model": case.model, "network": case.network, "world_size": case.world_size,
                   "algorithm": name, "iteration": i, "iteration_s": t}
                  for name, measured in zip([*algorithms, COMPUTE_ONLY], times, strict=True)
                  for i, t in enumerate(measured)]
    return rows, iterations, plans


def _row(case: ShardedCase, name: str, plan: ShardedPlan, measured: list[float],
         grouped: list[list[str]], bases: dict[str, list[float] | None], seed: int, *,
         raw: Any, scaled: Any, scale: float, control: list[float],
         peaks: tuple[int | None, int | None]) -> dict[str, Any]:
    """One plan's row of ``measured.csv``."""
    point, low, high = bootstrap_ratio(bases["fsdp2"], measured, seed=seed)
    other = bases["noreshard"]
    vs_noreshard = bootstrap_ratio(other, measured, seed=seed) if other is not None \
        else (math.nan, math.nan, math.nan)
    median = statistics.median(measured)
    return {
        "model": case.model, "batch_size": case.batch_size, "world_size": case.world_size,
        "network": case.network, "algorithm": name, "n_units": plan.n_units,
        "reshard_after_forward": all(u.reshard_after_forward for u in plan.units),
        "forward_prefetch": plan.forward_prefetch, "backward_prefetch": plan.backward_prefetch,
        "units_match": grouped == [sorted(u.tensors) for u in plan.units],
        "compute_only_s": statistics.median(control), "compute_scale": scale,
        "predicted_raw_s": raw.iteration_s, "predicted_s": scaled.iteration_s,
        "predicted_peak_bytes": scaled.gathered_peak_bytes,
        "measured_peak_bytes": peaks[0], "compute_only_peak_bytes": peaks[1],
        "measured_s": median, "measured_p10_s": float(np.percentile(measured, 10)),
        "measured_p90_s": float(np.percentile(measured, 90)), "iters": len(measured),
        "error_raw_pct": 100.0 * (raw.iteration_s / median - 1.0),
        "error_pct": 100.0 * (scaled.iteration_s / median - 1.0),
        "speedup_vs_fsdp2": point, "speedup_low": low, "speedup_high": high,
        "speedup_vs_noreshard": vs_noreshard[0], "speedup_vs_noreshard_low": vs_noreshard[1],
        "speedup_vs_noreshard_high": vs_noreshard[2]}
