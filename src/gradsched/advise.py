"""``gradsched advise --validate``: the advice measured for real on this machine.

Stock PyTorch DDP with the per-bucket caps (``bucket_cap_mb_list``), at the best uniform
cap and at the user's current setting, and the gradsched plan through the executor when it
is the recommendation, timed in interleaved rounds, with a bootstrap 95 % interval of each
speedup (Efron & Tibshirani 1993, ch. 13). Every run of the caps also checks that DDP
rebuilt exactly the caps' buckets (:func:`gradsched.runtime.bench.rebuilt_buckets`: torch
2.14's ``_get_ddp_logging_data()['rebuilt_per_bucket_param_indices']``, written when the
reducer rebuilds its buckets in gradient-ready order after the first iteration).

The recommendation itself is :mod:`gradsched.experiments.recommend`. No torch import at
module level: :func:`validate` imports the runtime (and so torch) when it runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.errors import ConfigError, InputError
from gradsched.experiments.bootstrap import BOOTSTRAP_RESAMPLES, bootstrap_ratio
from gradsched.experiments.recommend import PLAN_ALGORITHM, Recommendation
from gradsched.plan import Plan
from gradsched.workloads import build_model

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
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            "iteration_s": {k: list(v) for k, v in self.times.items()},
            "median_s": {k: float(np.median(v)) for k, v in self.times.items()},
            "speedups": {k: dict(zip(("point", "low", "high"), v, strict=True))
                         for k, v in self.speedups.items()},
            "rebuilt_buckets_match": self.rebuilt_match}


def speedups(times: dict[str, list[float]]) -> dict[str, tuple[float, float, float]]:
    """``new_over_old``: t_old / t_new with its bootstrap interval, for every pair of
    :data:`COMPARISONS` that ran."""
    return {f"{new}_over_{old}": bootstrap_ratio(times[old], times[new])
            for new, old in COMPARISONS if new in times and old in times}


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
    lines = [f"validation ({val.backend}, {rec.world_size} ranks on this machine, "
             f"{val.rounds} rounds x {val.iters} timed iterations after {val.warmup} "
             "warm-up, median of the slowest rank's iteration times):"]
    for kind, values in val.times.items():
        lines.append(f"  {KIND_LABELS[kind]}:  {float(np.median(values)):.3g} s  "
                     f"(n={n[kind]})")
    if val.rebuilt_match is not None:
        lines.append("  rebuilt buckets: " + (
            f"DDP rebuilt exactly the {rec.ddp_list.n_buckets} buckets of the caps"
            if val.rebuilt_match and rec.ddp_list is not None
            else "DDP did NOT rebuild the caps' buckets on this torch: the list does not "
            "reproduce the planned buckets"))
    pred = predicted_s(rec)
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


def _item(rec: Recommendation, kind: str, label: str) -> Any:
    from gradsched.runtime.bench import RunItem  # the runtime imports torch

    if kind == "plan":
        return RunItem(label, PLAN_ALGORITHM, plan=rec.plan.to_dict())
    if kind == "list":
        assert rec.ddp_list is not None
        return RunItem(label, "ddp-native", bucket_cap_mb_list=list(rec.ddp_list.caps.paste_mb),
                       expected_buckets=expected_buckets(rec))
    cap = rec.ddp_best if kind == "uniform" else rec.ddp_current
    return RunItem(label, "ddp-native", bucket_cap_mb=cap.bucket_cap_mb)


def validation_items(rec: Recommendation, rounds: int) -> list[tuple[str, Any]]:
    """(kind, RunItem) per timed run: every round runs each of :func:`validation_kinds`,
    in an order reversed every other round so that a drift of the machine's load biases
    none."""
    kinds = validation_kinds(rec)
    return [(kind, _item(rec, kind, f"{kind}#round{r}"))
            for r in range(rounds) for kind in (kinds if r % 2 == 0 else kinds[::-1])]


def validate(rec: Recommendation, *, model_name: str, batch_size: int, backend: str = "gloo",
             rounds: int = 3, iters: int = 10, warmup: int = 2, threads: int = 1,
             seq_len: int | None = None, timeout_s: float = 300.0,
             cluster: str | None = None) -> Validation:
    """Run every kind for real (:func:`gradsched.runtime.bench.run_items`, which also
    checks the caps' rebuilt buckets) and bootstrap the speedups."""
    from gradsched.runtime.bench import run_items  # the runtime imports torch

    if rounds < 1 or iters < 2 or warmup < 0:
        raise ConfigError("--rounds must be >= 1, --iters >= 2 and --warmup >= 0")
    check_model_names(rec.plan, model_name, batch_size, seq_len, rec.compute)
    if rec.ddp_list is not None:
        if warmup < 1:
            raise ConfigError("--warmup must be >= 1 to run per-bucket caps: DDP rebuilds its "
                              "buckets after the first iteration")
        check_model_names(rec.ddp_list.plan, model_name, batch_size, seq_len, rec.compute)
    pairs = validation_items(rec, rounds)
    before = os.getloadavg()[0]
    frame, summary = run_items([item for _, item in pairs], model=model_name, batch_size=batch_size,
                         world_size=rec.world_size, backend=backend, iters=iters,
                         warmup=warmup, threads=threads, cluster=cluster, seq_len=seq_len,
                         timeout_s=timeout_s)
    lists = [item.label for kind, item in pairs if kind == "list"]
    match = (bool(summary.loc[summary["plan"].isin(lists), "ddp_buckets_match"].eq(True).all())
             if lists else None)
    times: dict[str, list[float]] = {}
    for kind, item in pairs:
        values = frame.loc[frame["plan"] == item.label, "iteration_s"].tolist()
        times.setdefault(kind, []).extend(float(v) for v in values)
    return Validation(backend, rounds, iters, warmup, times, speedups(times), match,
                      (before, os.getloadavg()[0]), os.cpu_count() or 0)


# --------------------------------------------------------------------------- checks
def check_model_names(plan: Plan, model_name: str, batch_size: int, seq_len: int | None,
                      compute: str) -> None:
    """The plan's tensors (the trace's) must be the model's trainable parameters, same
    names; the error names the first name missing on each side and the trace file."""
    spec = build_model(model_name, batch_size, seq_len=seq_len)
    names = {n for n, p in spec.model.named_parameters() if p.requires_grad}
    planned = {t for b in plan.buckets for t in b.tensors}
    if names != planned:
        missing = sorted(names - planned)
        extra = sorted(planned - names)
        raise InputError(
            f"the trace's tensors are not model {model_name!r}'s parameters: "
            f"{len(missing)} in the model, not the trace (first: "
            f"{missing[0] if missing else 'none'!r}); {len(extra)} in the trace, not the "
            f"model (first: {extra[0] if extra else 'none'!r}): give --model the model the "
            "trace was captured from", path=compute, field="tensor")


def expected_buckets(rec: Recommendation) -> list[list[str]]:
    """The caps' buckets as tensor names, ready order (sorted names within a bucket)."""
    assert rec.ddp_list is not None
    return [sorted(b.tensors) for b in rec.ddp_list.plan.buckets]




# --------------------------------------------------------------------------- sharded
def validate_sharded(adv: Any, *, model_name: str, batch_size: int, rounds: int = 3,
                     iters: int = 5, warmup: int = 1, seq_len: int | None = None,
                     cluster: str | None = None, timeout_s: float = 300.0) -> dict[str, Any]:
    """FSDP2's default layout and the optimum (a
    :class:`~gradsched.experiments.recommend_sharded.ShardedAdvice`) run with stock FSDP2
    on ``adv.world_size`` local ranks (gloo; :func:`gradsched.runtime.fsdp2.run_plans`,
    rounds in random order), the units FSDP2 formed checked against each plan, and the
    measured speedup of the optimum with its bootstrap interval."""
    from gradsched.runtime.fsdp2 import run_plans  # the runtime imports torch

    plans = [adv.default, adv.best]
    times, groups = run_plans(plans, model=model_name, batch_size=batch_size,
                              world_size=adv.world_size, rounds=rounds, iters=iters,
                              warmup=warmup, cluster=cluster, seq_len=seq_len,
                              timeout_s=timeout_s)
    matched = [g == [sorted(u.tensors) for u in p.units]
               for p, g in zip(plans, groups, strict=True)]
    point, low, high = bootstrap_ratio(times[0], times[1])
    return {"rounds": rounds, "iters": iters, "warmup": warmup,
            "median_s": {"default": float(np.median(times[0])),
                         "optimum": float(np.median(times[1]))},
            "iteration_s": {"default": times[0], "optimum": times[1]},
            "units_match": {"default": matched[0], "optimum": matched[1]},
            "speedup_optimum_over_default": {"point": point, "low": low, "high": high,
                                             "confidence": 0.95}}


def render_sharded_validation(result: dict[str, Any]) -> str:
    """The measured comparison as text."""
    med = result["median_s"]
    sp = result["speedup_optimum_over_default"]
    ok = all(result["units_match"].values())
    return (f"measured (stock FSDP2, {result['rounds']} rounds x {result['iters']} timed "
            f"iterations): FSDP2 default {med['default']:.3g} s, optimum {med['optimum']:.3g} s;"
            f" speedup {sp['point']:.3f} [{sp['low']:.3f}, {sp['high']:.3f}] (bootstrap 95 %)"
            f"\n  units: FSDP2 formed {'exactly' if ok else 'NOT'} the plans' units\n")
