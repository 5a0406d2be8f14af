"""``gradsched advise --validate``: the advice measured for real on this machine, the way
the re-execution measures.

Stock PyTorch DDP with the per-bucket caps (``bucket_cap_mb_list``), at the best uniform
cap and at the user's current setting, and the gradsched plan through the executor when it
is the recommendation: items of the timing protocol (:mod:`gradsched.runtime.rounds`,
seeded interleaved rounds), each speedup with the re-execution's 95 % bootstrap interval
(iterations resampled within rounds, :func:`gradsched.reexec.uncertainty.bootstrap_medians`;
Efron & Tibshirani 1993, ch. 13). Every run of the caps also checks, on every rank and in
every round, that DDP rebuilt exactly the caps' buckets
(:func:`gradsched.reexec.run.rebuilt_record`, as the re-execution's ``ddp-list`` items).
``--sharded``: FSDP2's default and the optimum through the sharded re-execution's
measurement (:func:`gradsched.reexec.sharded.measure_plans`). With ``--grad-accum K``
(the recommendation's ``options["grad_accum"]``) every timed iteration of every item is
one optimizer step of ``K`` micro-batches (:mod:`gradsched.runtime.runners`: the first
``K - 1`` under stock DDP's ``no_sync()`` or the executor's), each item's time shown beside
the replay's prediction of that step, and the micro-batches each step ran are counted
(:func:`gradsched.runtime.rounds.micro_batches_per_step`).

Before any rank starts, the plans must cover the model (the sharded ones too): the pre-launch
gate that ``gradsched run`` calls (:func:`gradsched.runtime.prelaunch.check_plans`, on the
meta device). The recommendation itself is :mod:`gradsched.experiments.recommend`. This
module imports the runtime (and so torch): ``gradsched advise`` loads it only with
``--validate``.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import ConfigError
from gradsched.experiments.recommend import PLAN_ALGORITHM, Recommendation
from gradsched.reexec.run import rebuilt_record
from gradsched.reexec.sharded import ShardedCase, iteration_rows, measure_plans, replicates
from gradsched.reexec.uncertainty import N_BOOT, bootstrap_medians, ratio_interval
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

CASE = "advise-validate"
"""The case name that seeds the bootstrap of a validation."""

KIND_LABELS = {"list": "per-bucket caps (bucket_cap_mb_list)", "uniform": "best uniform cap",
               "current": "your setting", "plan": "gradsched plan (executor)"}
COMPARISONS = (("uniform", "current"), ("list", "current"), ("list", "uniform"),
               ("plan", "list"), ("plan", "uniform"))
"""(faster candidate, what it is compared with) for each bootstrapped speedup, when both
ran."""


# --------------------------------------------------------------------------- statistics


def predicted_s(rec: Recommendation) -> dict[str, float]:
    """The predicted iteration time of each kind a validation can run."""
    out = {"current": rec.ddp_current.iteration_s, "uniform": rec.ddp_best.iteration_s,
           "plan": rec.plan_s}
    if rec.ddp_list is not None:
        out["list"] = rec.ddp_list.iteration_s
    return out


@dataclass(frozen=True)
class Validation:
    """Measured iteration times (pooled over rounds), the speedups and the rebuild check."""

    backend: str
    rounds: int
    iters: int
    warmup: int
    times: dict[str, list[float]]  # kind -> seconds; kinds of :func:`validation_kinds`
    speedups: dict[str, tuple[float, float, float]]  # "new_over_old" -> t_old/t_new, CI
    rebuilt_match: bool | None  # the list's rebuilt buckets are the caps' (None: no list)
    load_avg_1m: tuple[float, float] = (math.nan, math.nan)  # before, after the runs
    cpus: int = 0
    grad_accum: int = 1  # micro-batches per timed iteration (one optimizer step)
    micro_batches: dict[str, float] | None = None  # kind -> measured per step, fewest

    @property
    def loaded(self) -> bool:
        """Whether something else loaded the machine: a 1-minute load average above the
        CPU count before the runs started (the ranks themselves raise it afterwards)."""
        return self.cpus > 0 and self.load_avg_1m[0] > self.cpus

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "rounds": self.rounds, "iters": self.iters,
            "warmup": self.warmup, "load_avg_1m_before": self.load_avg_1m[0],
            "load_avg_1m_after": self.load_avg_1m[1], "cpus": self.cpus,
            "loaded": self.loaded, "confidence": 0.95,
            "bootstrap_resamples": N_BOOT, "bootstrap": "iterations resampled within rounds",
            "iteration_s": {k: list(v) for k, v in self.times.items()},
            "median_s": {k: float(np.median(v)) for k, v in self.times.items()},
            "speedups": {k: dict(zip(("point", "low", "high"), v, strict=True))
                         for k, v in self.speedups.items()},
            "rebuilt_buckets_match": self.rebuilt_match, "grad_accum": self.grad_accum,
            "micro_batches_per_step": self.micro_batches}


def speedups(rows: pd.DataFrame, kinds: list[str]) -> dict[str, tuple[float, float, float]]:
    """``new_over_old``: t_old / t_new with its bootstrap interval, for every pair of
    :data:`COMPARISONS` that ran; ``rows``: one per timed iteration (``item`` = kind,
    ``round``, ``iteration_s``)."""
    reps = bootstrap_medians(rows.assign(case=CASE), CASE, kinds)
    return {f"{new}_over_{old}": ratio_interval(reps, old, new)
            for new, old in COMPARISONS if new in kinds and old in kinds}


# --------------------------------------------------------------------------- rendering
def _verdict(low: float, high: float) -> str:
    if low > 1.0:
        return "faster (the interval excludes 1)"
    if high < 1.0:
        return "slower (the interval excludes 1)"
    return "no difference this measurement can resolve (the interval includes 1)"


def render_validation(rec: Recommendation, val: Validation) -> str:
    """The human text of a validation."""
    n = {k: len(v) for k, v in val.times.items()}
    step = "iteration" if val.grad_accum == 1 else \
        f"optimizer step of {val.grad_accum} micro-batches"
    lines = [f"validation ({val.backend}, {rec.world_size} ranks on this machine, "
             f"{val.rounds} rounds x {val.iters} timed iterations after {val.warmup} "
             f"warm-up, median of the slowest rank's time per {step}):"]
    pred = predicted_s(rec)
    for kind, values in val.times.items():
        lines.append(f"  {KIND_LABELS[kind]}:  {float(np.median(values)):.3g} s  "
                     f"(n={n[kind]}; predicted {pred[kind]:.3g} s)")
    if val.rebuilt_match is not None:
        lines.append("  rebuilt buckets: " + (
            f"DDP rebuilt exactly the {rec.ddp_list.n_buckets} buckets of the caps"
            if val.rebuilt_match and rec.ddp_list is not None
            else "DDP did NOT rebuild the caps' buckets on this torch: the list does not "
            "reproduce the planned buckets"))
    for key, (point, low, high) in val.speedups.items():
        new, old = key.split("_over_")
        lines.append(f"measured speedup of {KIND_LABELS[new]} over {KIND_LABELS[old]}: "
                     f"{point:.3f}x, 95 % bootstrap interval [{low:.3f}, {high:.3f}] "
                     f"(predicted {pred[old] / pred[new]:.3f}x): {_verdict(low, high)}")
    if val.loaded:
        lines.append(f"warning: the machine was loaded before the runs (1-minute load "
                     f"average {val.load_avg_1m[0]:.2f} on {val.cpus} CPUs): other jobs "
                     "share the cores, so the times and the interval are noisier than on an "
                     "idle machine; re-run --validate when it is idle")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the runs
def validation_kinds(rec: Recommendation) -> list[str]:
    """What a validation runs: the list (if any), your setting, the best uniform cap (when
    it is not your setting), the plan (when it is the recommendation)."""
    kinds = ["list"] if rec.ddp_list is not None else []
    kinds.append("current")
    if rec.ddp_best.bucket_cap_mb != rec.ddp_current.bucket_cap_mb:
        kinds.append("uniform")
    if rec.use_plan:
        kinds.append("plan")
    return kinds


def validation_items(rec: Recommendation) -> list[Item]:
    """One item of the timing protocol per kind of :func:`validation_kinds` (key = kind)."""
    out = []
    for kind in validation_kinds(rec):
        if kind == "plan":
            out.append(Item(kind, "plan", plan=rec.plan.to_dict(), name=PLAN_ALGORITHM))
        elif kind == "list":
            assert rec.ddp_list is not None
            out.append(Item(kind, "ddp-list",
                            bucket_cap_mb_list=list(rec.ddp_list.caps.paste_mb),
                            expected_buckets=expected_buckets(rec)))
        else:
            cap = rec.ddp_best if kind == "uniform" else rec.ddp_current
            out.append(Item(kind, "ddp", bucket_cap_mb=cap.bucket_cap_mb))
    return out


def validate(rec: Recommendation, timing: Timing, where: Launch) -> Validation:
    """Run every kind for real in interleaved rounds (``timing``, whose micro-batches per
    step are the recommendation's; ``where``: ``rec.world_size`` ranks), check the caps'
    rebuilt buckets and bootstrap the speedups."""
    model_name, batch_size, seq_len = timing.model, timing.batch_size, timing.seq_len
    rounds, iters, warmup = timing.rounds, timing.iters, timing.warmup
    if rounds < 1 or iters < 2 or warmup < 0:
        raise ConfigError("--rounds must be >= 1, --iters >= 2 and --warmup >= 0")
    hint = ": give --model the model the trace was captured from"
    trainable = check_plans([(rec.compute, rec.plan)], model=model_name,
                            batch_size=batch_size, seq_len=seq_len, hint=hint)
    if rec.ddp_list is not None:
        if warmup < 1:
            raise ConfigError("--warmup must be >= 1 to run per-bucket caps: DDP rebuilds its "
                              "buckets after the first iteration")
        check_plans([(rec.compute, rec.ddp_list.plan)], model=model_name,
                    batch_size=batch_size, seq_len=seq_len, trainable=trainable, hint=hint)
    items = validation_items(rec)
    k = int(rec.options.get("grad_accum", 1))  # the replay's step: k micro-batches
    timing = replace(timing, grad_accum=k)
    before = os.getloadavg()[0]
    results = launch_rounds(items, timing, where).results
    rows = pd.DataFrame([{"item": item.key, "round": results[0]["runs"][run]["round"],
                          "iteration_s": t}
                         for k, item in enumerate(items) for run in runs_of(results, k)
                         for t in slowest(results, run, rec.world_size)])
    times = {item.key: rows.loc[rows["item"] == item.key, "iteration_s"].tolist()
             for item in items}
    rebuilt = rebuilt_record([asdict(i) for i in items], results).get("list")
    match = None if rebuilt is None else bool(rebuilt["buckets_match_plan"])
    micro = {item.key: min(micro_batches_per_step(results, run, timing)
                           for run in runs_of(results, i)) for i, item in enumerate(items)}
    return Validation(where.backend, rounds, iters, warmup, times,
                      speedups(rows, [i.key for i in items]), match,
                      (before, os.getloadavg()[0]), os.cpu_count() or 0, k, micro)


def expected_buckets(rec: Recommendation) -> list[list[str]]:
    """The caps' buckets as tensor names, ready order (sorted names within a bucket)."""
    assert rec.ddp_list is not None
    return [sorted(b.tensors) for b in rec.ddp_list.plan.buckets]


# --------------------------------------------------------------------------- sharded
def validate_sharded(adv: Any, timing: Timing, where: Launch,
                     source: str = "the compute trace") -> dict[str, Any]:
    """FSDP2's default layout and the optimum (a
    :class:`~gradsched.experiments.recommend_sharded.ShardedAdvice`) run with stock FSDP2
    on ``adv.world_size`` local ranks by the sharded re-execution's measurement (gloo;
    :func:`gradsched.reexec.sharded.measure_plans`, interleaved rounds), the units FSDP2
    formed checked against each plan, and the measured speedup of the optimum with the
    re-execution's bootstrap interval (``timing``; ``where``: ``adv.world_size`` ranks);
    every timed iteration one optimizer step of ``timing.grad_accum`` micro-batches (FSDP2
    with gradient sync off for the first ``grad_accum - 1``, as the replay of ``adv``
    assumed). Before any rank starts, both
    plans must fit the model (:func:`gradsched.runtime.prelaunch.check_plans`; ``source``:
    the compute trace they were made from, which a refusal names)."""
    plans = [adv.default, adv.best]
    model_name, batch_size, seq_len = timing.model, timing.batch_size, timing.seq_len
    cluster = where.cluster
    check_plans([(source, plan) for plan in plans], model=model_name, batch_size=batch_size,
                seq_len=seq_len, trace=(source, adv.names),
                hint=": give --model the model the trace was captured from")
    runs = measure_plans(plans, timing, where)
    case = ShardedCase(model_name, batch_size, adv.world_size,
                       "loopback" if cluster is None else cluster, cluster, seq_len)
    names = ["default", "optimum"]
    reps = replicates(f"advise-{case.name}", iteration_rows(case, names, runs), names)
    point, low, high = ratio_interval(reps, "default", "optimum")
    matched = [g == [sorted(u.tensors) for u in p.units]
               for p, g in zip(plans, runs.groups, strict=True)]
    times = runs.times_s
    return {"rounds": timing.rounds, "iters": timing.iters, "warmup": timing.warmup,
            "grad_accum": timing.grad_accum,
            "predicted_s": {"default": adv.default_replay.iteration_s,
                            "optimum": adv.best_replay.iteration_s},
            "median_s": {"default": float(np.median(times[0])),
                         "optimum": float(np.median(times[1]))},
            "iteration_s": {"default": times[0], "optimum": times[1]},
            "units_match": {"default": matched[0], "optimum": matched[1]},
            "micro_batches_per_step": {"default": runs.micro_batches[0],
                                       "optimum": runs.micro_batches[1]},
            "speedup_optimum_over_default": {"point": point, "low": low, "high": high,
                                             "confidence": 0.95}}


def render_sharded_validation(result: dict[str, Any]) -> str:
    """The measured comparison as text."""
    med = result["median_s"]
    sp = result["speedup_optimum_over_default"]
    ok = all(result["units_match"].values())
    pred = result["predicted_s"]
    k = result["grad_accum"]
    step = "iterations" if k == 1 else f"optimizer steps of {k} micro-batches"
    return (f"measured (stock FSDP2, {result['rounds']} rounds x {result['iters']} timed "
            f"{step}): FSDP2 default {med['default']:.3g} s (predicted "
            f"{pred['default']:.3g} s), optimum {med['optimum']:.3g} s (predicted "
            f"{pred['optimum']:.3g} s);"
            f" speedup {sp['point']:.3f} [{sp['low']:.3f}, {sp['high']:.3f}] (bootstrap 95 %)"
            f"\n  units: FSDP2 formed {'exactly' if ok else 'NOT'} the plans' units\n")
