"""Sharded plans measured against their prediction: the re-execution protocol for FSDP2.

One case = a model, batch size, world size and network (loopback, or the emulated cluster
at a ``tc`` rate). Each planner's :class:`~gradsched.plan_sharded.ShardedPlan` is made from
the committed compute trace and the network's committed gloo sweep, predicted by the
sharded replay in *blocking* semantics (FSDP2 on gloo: the host waits for every
collective, :mod:`gradsched.replay.sharded`), and run with stock FSDP2
(:func:`measure_plans`: ``fsdp2`` items of the timing protocol,
:mod:`gradsched.runtime.rounds`: every plan in each of ``rounds`` rounds, in a seeded random
order, a fresh model each time, ``warmup`` untimed and ``iters`` timed iterations; the
slowest rank's period). Reported per plan: the median, p10 and p90 of the pooled
iterations, the prediction and its error, and the speedup over FSDP2's defaults (ratio of
medians) with the re-execution's 95 % percentile bootstrap interval (iterations resampled
within rounds, :func:`gradsched.reexec.uncertainty.bootstrap_medians`; the same for
``gradsched advise --sharded --validate``).

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
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import OPTIMUM, optimum
from gradsched.intermediates import INT, REAL, TEXT, Column, Spec, read_intermediate
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import make_sharded_plan
from gradsched.reexec.meta import META, read_meta
from gradsched.reexec.predict import scaled_trace, trace_compute_s
from gradsched.reexec.run import CONTROL
from gradsched.reexec.uncertainty import Replicates, bootstrap_medians, ratio_interval
from gradsched.replay.sharded import replay_sharded
from gradsched.runtime.prelaunch import check_plans
from gradsched.runtime.rounds import (
    Item,
    Launch,
    Timing,
    launch_rounds,
    micro_batches_per_step,
    runs_of,
    slowest,
)
from gradsched.traces.bundle import ComputeTrace

BASELINE = "fsdp2"
NO_RESHARD = "fsdp2-noreshard"
OPTIMUM_CAPPED = "sharded-optimum-capped"
"""The optimum under a memory cap equal to the baseline's predicted peak."""

SHARDED_ITERATIONS = Spec("sharded re-execution iterations", (
    Column("algorithm", TEXT), Column("iteration", INT, minimum=0),
    Column("iteration_s", REAL, minimum=0.0)))
"""A case folder's ``iterations.csv`` (``round`` too since the intervals are resampled
within rounds)."""

SHARDED_MEASURED = Spec("sharded re-execution measurements", (Column("algorithm", TEXT),))
"""A case folder's ``measured.csv`` (the columns :func:`rederived_speedups` reads)."""


@dataclass(frozen=True)
class ShardedCase:
    """What one measurement runs."""

    model: str
    batch_size: int
    world_size: int
    network: str  # loopback or an emulated-cluster network key
    cluster: str | None  # the tc rate of the emulated cluster, None on loopback
    seq_len: int | None = None

    @property
    def name(self) -> str:
        """``<model>-b<batch>-p<P>-<network>``: the folder of its committed measurement and
        the name that seeds its bootstrap."""
        return f"{self.model}-b{self.batch_size}-p{self.world_size}-{self.network}"


@dataclass(frozen=True)
class PlanRuns:
    """Per item of :func:`measure_plans`: every timed iteration (the slowest rank's period)
    pooled over rounds and the round of each, the parameter names FSDP2 grouped in each
    unit (rank 0, first run; none for the control) and, when measured, the peak of CPU
    memory allocated during one extra iteration (:mod:`gradsched.runtime.cpu_memory`), the
    largest over ranks and rounds (``None`` when not measured); the micro-batches each ran
    per iteration, the fewest over its runs and ranks
    (:func:`gradsched.runtime.rounds.micro_batches_per_step`)."""

    times_s: list[list[float]]
    rounds: list[list[int]]
    groups: list[list[list[str]]]
    peak_bytes: list[int | None]
    micro_batches: list[float]


def measure_plans(plans: Sequence[ShardedPlan | Literal["compute-only"]], timing: Timing,
                  where: Launch) -> PlanRuns:
    """Launch the ranks (``where``: loopback, or the emulated cluster at its ``cluster``'s
    rate) and run every plan (or :data:`~gradsched.reexec.run.CONTROL`, the compute-only
    control) ``timing.rounds`` times in interleaved random order (:class:`PlanRuns`);
    ``timing.memory``: one more, profiled iteration after each run's timed ones; every
    iteration one optimizer step of ``timing.grad_accum`` micro-batches
    (:mod:`gradsched.runtime.runners`)."""
    if not plans:
        raise ConfigError("nothing to run: give at least one sharded plan")
    if timing.iters < 1 or timing.warmup < 1 or timing.rounds < 1:
        raise ConfigError("--iters, --warmup and --rounds must be >= 1 (FSDP2's first "
                          "iteration initialises lazily)")
    items = [Item(CONTROL, "control") if isinstance(p, str)
             else Item(p.algorithm, "fsdp2", plan=p.to_dict()) for p in plans]
    memory, world_size = timing.memory, where.world_size
    results = launch_rounds(items, timing, where).results
    out = PlanRuns([], [], [], [], [])
    for k in range(len(items)):
        runs = runs_of(results, k)
        per_run = [slowest(results, j, world_size) for j in runs]
        out.times_s.append([t for times in per_run for t in times])
        out.rounds.append([results[0]["runs"][j]["round"] for j, times in zip(
            runs, per_run, strict=True) for _ in times])
        out.groups.append(results[0]["runs"][runs[0]]["unit_tensors"])
        out.peak_bytes.append(max(int(r["runs"][j]["peak_bytes"]) for r in results
                                  for j in runs) if memory else None)
        out.micro_batches.append(min(micro_batches_per_step(results, j, timing) for j in runs))
    return out


def run_plans(plans: Sequence[ShardedPlan | Literal["compute-only"]], timing: Timing,
              where: Launch) -> tuple[list[list[float]], list[list[list[str]]]]:
    """:func:`measure_plans` without memory: per item, the pooled timed iterations and the
    units FSDP2 formed."""
    runs = measure_plans(plans, replace(timing, memory=False), where)
    return runs.times_s, runs.groups


def iteration_rows(case: ShardedCase, names: Sequence[str], runs: PlanRuns
                   ) -> list[dict[str, Any]]:
    """One row per timed iteration of each item (``names``: the items' labels)."""
    return [{"model": case.model, "network": case.network, "world_size": case.world_size,
             "algorithm": name, "round": r, "iteration": i, "iteration_s": t}
            for name, measured, rounds in zip(names, runs.times_s, runs.rounds, strict=True)
            for i, (t, r) in enumerate(zip(measured, rounds, strict=True))]


def replicates(case_name: str, iterations: Sequence[dict[str, Any]],
               names: Sequence[str]) -> Replicates:
    """The re-execution's bootstrap of the medians of ``names`` from :func:`iteration_rows`
    (resampled within rounds, seeded by ``case_name`` and the names)."""
    frame = pd.DataFrame(list(iterations)).rename(columns={"algorithm": "item"})
    return bootstrap_medians(frame.assign(case=case_name), case_name, names)


def plans_for(trace: ComputeTrace, model: CommModel, world_size: int,
              algorithms: Sequence[str], memory_cap_bytes: float | None) -> list[ShardedPlan]:
    """Each algorithm's plan (the optimum in blocking semantics, as the run executes)."""
    if BASELINE not in algorithms:
        raise ConfigError(f"the measured plans must include {BASELINE} (the baseline)")
    out = []
    for name in algorithms:
        if name == OPTIMUM:
            out.append(optimum(ShardedProblem(trace, model, world_size, semantics="blocking",
                                              memory_cap_bytes=memory_cap_bytes)).plan)
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
    plan = optimum(ShardedProblem(trace, model, world_size, semantics="blocking",
                                  memory_cap_bytes=cap.gathered_peak_bytes)).plan
    return replace(plan, algorithm=OPTIMUM_CAPPED,
                   info={**plan.info, "memory_cap": f"{BASELINE}'s predicted peak"})


def measure(case: ShardedCase, trace: ComputeTrace, model: CommModel,
            algorithms: Sequence[str], timing: Timing, *,
            memory_cap_bytes: float | None = None, source: str = "the compute trace"
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[ShardedPlan]]:
    """Plan, run (with the compute-only control; ``timing``, for the case's model, batch
    and sequence length, each run's memory profiled) and predict; returns (one row per plan,
    one row per timed iteration, the plans). The plans are checked against the case's
    model before any rank starts (:func:`gradsched.runtime.prelaunch.check_plans`;
    ``source``: the compute trace they are made from, which a refusal names)."""
    plans = plans_for(trace, model, case.world_size, algorithms, memory_cap_bytes)
    check_plans([(source, plan) for plan in plans], model=case.model,
                batch_size=case.batch_size, seq_len=case.seq_len, trace=(source, trace.names))
    runs = measure_plans([*plans, CONTROL], timing,
                         Launch(world_size=case.world_size, cluster=case.cluster))
    times = runs.times_s
    control = times[-1]
    scale = statistics.median(control) / trace_compute_s(trace)
    scaled = scaled_trace(trace, scale)
    names = list(algorithms)
    iterations = iteration_rows(case, [*names, CONTROL], runs)
    reps = replicates(case.name, iterations, names)
    rows = [_row(case, name, plan, _Measured(measured, grouped, peak, control,
                                             runs.peak_bytes[-1]), reps,
                 raw=replay_sharded(trace, plan, model, case.world_size, semantics="blocking"),
                 scaled=replay_sharded(scaled, plan, model, case.world_size,
                                       semantics="blocking"),
                 scale=scale)
            for name, plan, measured, grouped, peak in zip(
                algorithms, plans, times[:-1], runs.groups[:-1], runs.peak_bytes[:-1],
                strict=True)]
    return rows, iterations, plans


def speedups(reps: Replicates, name: str) -> dict[str, float]:
    """The speed-up of ``name`` over FSDP2's defaults and over ``fsdp2-noreshard`` (NaN
    when that did not run): ratios of medians with their bootstrap intervals."""
    point, low, high = ratio_interval(reps, BASELINE, name)
    other = ratio_interval(reps, NO_RESHARD, name) if NO_RESHARD in reps.point \
        else (math.nan, math.nan, math.nan)
    return {"speedup_vs_fsdp2": point, "speedup_low": low, "speedup_high": high,
            "speedup_vs_noreshard": other[0], "speedup_vs_noreshard_low": other[1],
            "speedup_vs_noreshard_high": other[2]}


def read_iterations(folder: str | Path) -> list[dict[str, Any]]:
    """A measured case folder's ``iterations.csv`` as :func:`iteration_rows` writes it;
    files from before the ``round`` column pool the rounds in order, ``meta.json``'s
    ``iters`` iterations each, so the round is recovered from the iteration index."""
    folder = Path(folder)
    frame = read_intermediate(folder / "iterations.csv", (SHARDED_ITERATIONS,))
    if "round" not in frame:
        iters = read_meta(folder).get("iters")  # the input gate; a count checked there
        if iters is None:
            raise InputError("no 'iters': the rounds of iterations.csv (written without a "
                             "'round' column) cannot be told apart", path=folder / META,
                             field="iters")
        frame = frame.assign(round=frame["iteration"] // iters)
    return frame.to_dict("records")


def rederived_speedups(folder: str | Path) -> pd.DataFrame:
    """The speed-up columns of a measured case folder's ``measured.csv`` computed again
    from its iterations by :func:`speedups` (one row per plan, ``algorithm`` first): what
    a re-measurement would write for the same iterations."""
    folder = Path(folder)
    measured = read_intermediate(folder / "measured.csv", (SHARDED_MEASURED,))
    names = measured["algorithm"].astype(str).tolist()
    reps = replicates(folder.name, read_iterations(folder), names)
    return pd.DataFrame([{"algorithm": name, **speedups(reps, name)} for name in names])


@dataclass(frozen=True)
class _Measured:
    """One plan's measurement (pooled timed iterations, the units FSDP2 formed, the memory
    peak) and the compute-only control's (iterations, peak)."""

    times_s: list[float]
    grouped: list[list[str]]
    peak_bytes: int | None
    control_s: list[float]
    control_peak_bytes: int | None


def _row(case: ShardedCase, name: str, plan: ShardedPlan, runs: _Measured, reps: Replicates,
         *, raw: Any, scaled: Any, scale: float) -> dict[str, Any]:
    """One plan's row of ``measured.csv``."""
    measured, grouped, control = runs.times_s, runs.grouped, runs.control_s
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
        "measured_peak_bytes": runs.peak_bytes,
        "compute_only_peak_bytes": runs.control_peak_bytes,
        "measured_s": median, "measured_p10_s": float(np.percentile(measured, 10)),
        "measured_p90_s": float(np.percentile(measured, 90)), "iters": len(measured),
        "error_raw_pct": 100.0 * (raw.iteration_s / median - 1.0),
        "error_pct": 100.0 * (scaled.iteration_s / median - 1.0),
        **speedups(reps, name)}
