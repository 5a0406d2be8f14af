"""``gradsched advise --validate``: the recommended plan through the executor and PyTorch
DDP itself at the recommended cap (and at torch's default, if that differs), for real on
this machine, with a bootstrap 95 % interval of the speedup.

The recommendation itself (tuned DDP vs the gradsched plan, predicted by replay, and the
margin) is :mod:`gradsched.experiments.recommend`. No torch import at module level:
:func:`validate` imports the runtime (and so torch) when it runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.errors import ConfigError, InputError
from gradsched.experiments.recommend import PLAN_ALGORITHM, Recommendation
from gradsched.plan import Plan
from gradsched.workloads import build_model

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


# --------------------------------------------------------------------------- validation
def bootstrap_ratio(numerator: Sequence[float], denominator: Sequence[float], *,
                    resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = 0.95,
                    seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) and its percentile bootstrap interval
    (each sample resampled with replacement, independently; Efron & Tibshirani 1993,
    ch. 13). Deterministic for a given ``seed``."""
    a = np.asarray(numerator, dtype=float)
    b = np.asarray(denominator, dtype=float)
    if a.size < 2 or b.size < 2:
        raise ConfigError("the bootstrap needs at least 2 timed iterations per side")
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, size=(resamples, a.size))
    ib = rng.integers(0, b.size, size=(resamples, b.size))
    ratios = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(np.median(a) / np.median(b)), float(low), float(high)


@dataclass(frozen=True)
class Validation:
    """Measured iteration times (pooled over rounds) and the speedups."""

    backend: str
    rounds: int
    iters: int
    warmup: int
    times: dict[str, list[float]]  # "plan", "ddp" (recommended cap), maybe "ddp-default"
    speedup: tuple[float, float, float]  # t_ddp / t_plan: point, low, high
    tuned: tuple[float, float, float] | None  # t_ddp_default / t_ddp: point, low, high
    load_avg_1m: tuple[float, float] = (math.nan, math.nan)  # before, after the runs
    cpus: int = 0

    @property
    def loaded(self) -> bool:
        """Whether something else loaded the machine: a 1-minute load average above the
        CPU count before the runs started (the ranks themselves raise it afterwards)."""
        return self.cpus > 0 and self.load_avg_1m[0] > self.cpus

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend, "rounds": self.rounds, "iters": self.iters,
            "warmup": self.warmup, "load_avg_1m_before": self.load_avg_1m[0],
            "load_avg_1m_after": self.load_avg_1m[1], "cpus": self.cpus,
            "loaded": self.loaded, "confidence": 0.95, "bootstrap_resamples":
            BOOTSTRAP_RESAMPLES, "iteration_s": {k: list(v) for k, v in self.times.items()},
            "median_s": {k: float(np.median(v)) for k, v in self.times.items()},
            "speedup_plan_over_ddp": dict(zip(("point", "low", "high"), self.speedup,
                                              strict=True))}
        if self.tuned is not None:
            out["speedup_tuned_over_default_ddp"] = dict(
                zip(("point", "low", "high"), self.tuned, strict=True))
        return out


def _verdict(low: float, high: float, faster: str, slower: str) -> str:
    if low > 1.0:
        return f"{faster} is faster (the interval excludes 1)"
    if high < 1.0:
        return f"{slower} is faster (the interval excludes 1)"
    return "no difference this measurement can resolve (the interval includes 1)"


def render_validation(rec: Recommendation, val: Validation) -> str:
    """The human text of a validation."""
    med = {k: float(np.median(v)) for k, v in val.times.items()}
    n = {k: len(v) for k, v in val.times.items()}
    cap = rec.ddp_best.label
    point, low, high = val.speedup
    predicted = rec.ddp_best.iteration_s / rec.plan_s
    lines = [f"validation ({val.backend}, {rec.world_size} ranks on this machine, "
             f"{val.rounds} rounds x {val.iters} timed iterations after {val.warmup} "
             "warm-up, median of the slowest rank's iteration times):",
             f"  gradsched plan (executor):  {med['plan']:.6g} s  (n={n['plan']})",
             f"  PyTorch DDP, {cap}:  {med['ddp']:.6g} s  (n={n['ddp']})"]
    if "ddp-default" in med:
        lines.append(f"  PyTorch DDP, torch default:  {med['ddp-default']:.6g} s  "
                     f"(n={n['ddp-default']})")
    lines.append(f"measured speedup of the plan over DDP ({cap}): {point:.3f}x, 95 % "
                 f"bootstrap interval [{low:.3f}, {high:.3f}] (predicted {predicted:.3f}x): "
                 + _verdict(low, high, "the plan", "DDP"))
    if val.tuned is not None:
        tp, tl, th = val.tuned
        lines.append(f"measured speedup of DDP {cap} over torch's default: {tp:.3f}x, 95 % "
                     f"interval [{tl:.3f}, {th:.3f}] (predicted "
                     f"{rec.ddp_default.iteration_s / rec.ddp_best.iteration_s:.3f}x)")
    if val.loaded:
        lines.append(f"warning: the machine was loaded before the runs (1-minute load "
                     f"average {val.load_avg_1m[0]:.2f} on {val.cpus} CPUs): other jobs "
                     "share the cores, so the times and the interval are noisier than on an "
                     "idle machine; re-run --validate when it is idle")
    return "\n".join(lines) + "\n"


def validation_items(rec: Recommendation, rounds: int) -> list[tuple[str, Any]]:
    """(kind, RunItem) per timed run: every round runs the plan and DDP at the
    recommended cap (and at torch's default when the cap is not the default), in an
    order reversed every other round so that a drift of the machine's load biases
    neither."""
    from gradsched.runtime.bench import RunItem  # the runtime imports torch

    kinds = ["plan", "ddp"]
    if rec.ddp_best.bucket_cap_mb is not None:
        kinds.append("ddp-default")
    items = []
    for r in range(rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            label = f"{kind}#round{r}"
            if kind == "plan":
                item = RunItem(label, PLAN_ALGORITHM, plan=rec.plan.to_dict())
            elif kind == "ddp":
                item = RunItem(label, "ddp-native", bucket_cap_mb=rec.ddp_best.bucket_cap_mb)
            else:
                item = RunItem(label, "ddp-native", bucket_cap_mb=None)
            items.append((kind, item))
    return items


def validate(rec: Recommendation, *, model_name: str, batch_size: int, backend: str = "gloo",
             rounds: int = 3, iters: int = 10, warmup: int = 2, threads: int = 1,
             seq_len: int | None = None, timeout_s: float = 300.0,
             cluster: str | None = None) -> Validation:
    """Run the plan and DDP for real (:func:`gradsched.runtime.bench.run_items`) and
    bootstrap the speedups."""
    from gradsched.runtime.bench import run_items  # the runtime imports torch

    if rounds < 1 or iters < 2 or warmup < 0:
        raise ConfigError("--rounds must be >= 1, --iters >= 2 and --warmup >= 0")
    check_model_names(rec.plan, model_name, batch_size, seq_len, rec.compute)
    pairs = validation_items(rec, rounds)
    before = os.getloadavg()[0]
    frame, _ = run_items([item for _, item in pairs], model=model_name, batch_size=batch_size,
                         world_size=rec.world_size, backend=backend, iters=iters,
                         warmup=warmup, threads=threads, cluster=cluster, seq_len=seq_len,
                         timeout_s=timeout_s)
    times: dict[str, list[float]] = {}
    for kind, item in pairs:
        values = frame.loc[frame["plan"] == item.label, "iteration_s"].tolist()
        times.setdefault(kind, []).extend(float(v) for v in values)
    speedup = bootstrap_ratio(times["ddp"], times["plan"])
    tuned = (bootstrap_ratio(times["ddp-default"], times["ddp"])
             if "ddp-default" in times else None)
    return Validation(backend, rounds, iters, warmup, times, speedup, tuned,
                      (before, os.getloadavg()[0]), os.cpu_count() or 0)


def check_model_names(plan: Plan, model_name: str, batch_size: int, seq_len: int | None,
                      compute: str) -> None:
    """The plan's tensors must be the model's trainable parameters (same names)."""
    spec = build_model(model_name, batch_size, seq_len=seq_len)
    names = {n for n, p in spec.model.named_parameters() if p.requires_grad}
    planned = {t for b in plan.buckets for t in b.tensors}
    if names != planned:
        missing = sorted(names - planned)[:3]
        extra = sorted(planned - names)[:3]
        raise InputError(
            f"the trace's tensors are not model {model_name!r}'s parameters (in the model, "
            f"not the trace: {missing or 'none'}; in the trace, not the model: "
            f"{extra or 'none'}): give --model the model the trace was captured from",
            path=compute)
