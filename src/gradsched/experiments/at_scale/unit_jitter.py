"""How much a GPU's compute between two synchronisations varies on its own: the independent
jitter of the kernel time of short runs of kernels, from Kineto traces of several identical
steps.

**Physical cause.** Between two FSDP synchronisations a rank runs a fixed sequence of
kernels; their durations vary from step to step (clock and power management, memory
refresh, contention for L2 and HBM with the kernels beside them). Part of that variation is
common to the whole step (a step run at a lower clock); the rest is independent between
intervals, and only that part makes a different rank the slowest at each synchronisation
(:mod:`gradsched.experiments.at_scale.sync`).

**Measurement.** Per trace: the ``ProfilerStep#N`` ranges of the host (``user_annotation``),
each kernel assigned to the step whose range holds its launch (the ``cuda_runtime`` event of
the same ``correlation`` id; a kernel runs after its step's host range ends, so its own time
says nothing about its step); NCCL kernels left out. Only traces whose steps run the same
kernel names in the same order are measured (otherwise the chunks would compare different
work). The kernels of a step are cut into consecutive chunks of ``chunk_s`` mean kernel time
(the chunks of every step cut at the same kernels); chunk ``c`` of step ``s`` takes
``d_sc``. With the step's common factor ``g_s = sum_c d_sc / mean_s sum_c d_sc`` removed,
``r_sc = d_sc / (mean_s d_sc * g_s) - 1``, and the independent jitter is
``sqrt(sum r_sc^2 / ((S - 1)(C - 1)))`` (one degree of freedom per step and per chunk spent
on the means). Chunks shorter than half of ``chunk_s`` (the tail) are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import read_csv_frame
from gradsched.traces.importers.kineto.events import read_trace_json

CHUNK_S = 1e-3
"""Chunk length of the committed measurement: shorter than any FSDP unit's compute at the
published points, so the measured jitter is an upper bound of theirs (relative jitter falls
as independent chunks add up)."""


@dataclass(frozen=True)
class StepKernels:
    """Kernel durations of ``S`` identical steps: ``durations_s[s, k]``."""

    durations_s: np.ndarray
    device: str


def step_kernels(path: str | Path) -> StepKernels:
    """The compute kernels of every profiled step of ``path`` (module docstring); an
    InputError if there are fewer than three steps or the steps run different kernels."""
    data = read_trace_json(path)
    try:
        events = data["traceEvents"]
    except (KeyError, TypeError):
        raise InputError("no traceEvents", path=path) from None
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: float(e["ts"]))
    if len(steps) < 3:
        raise InputError(f"{len(steps)} profiler steps: at least 3 needed", path=path)
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}
    starts = np.array([float(s["ts"]) for s in steps])
    ends = starts + np.array([float(s["dur"]) for s in steps])
    per: list[list[tuple[str, float]]] = [[] for _ in steps]
    kernels = sorted((e for e in events if str(e.get("cat", "")).lower() == "kernel"
                      and not str(e.get("name", "")).startswith("nccl")),
                     key=lambda e: float(e["ts"]))
    for e in kernels:
        t = launch.get((e.get("args") or {}).get("correlation"))
        if t is None:
            continue
        s = int(np.searchsorted(starts, t, side="right")) - 1
        if s >= 0 and t < ends[s]:
            per[s].append((str(e.get("name", "")), float(e["dur"]) * 1e-6))
    names = [[n for n, _ in step] for step in per]
    if not names[0] or any(n != names[0] for n in names[1:]):
        raise InputError(f"the {len(steps)} profiled steps do not run the same kernels "
                         f"({', '.join(str(len(n)) for n in names)} kernels)", path=path)
    devices = data.get("deviceProperties") or [{}]
    return StepKernels(np.array([[d for _, d in step] for step in per]),
                       str(devices[0].get("name", "GPU not recorded")))


@dataclass(frozen=True)
class Jitter:
    """One trace's measurement (module docstring)."""

    steps: int
    kernels: int
    chunks: int
    step_cv: float
    independent_cv: float


def chunk_jitter(durations_s: np.ndarray, chunk_s: float = CHUNK_S) -> Jitter:
    """The independent jitter of ``chunk_s`` chunks of the ``S x K`` kernel durations."""
    d = np.asarray(durations_s, dtype=float)
    if d.ndim != 2 or d.shape[0] < 3 or d.shape[1] < 1 or not chunk_s > 0:
        raise InputError("chunk_jitter: need at least 3 steps of kernels and chunk_s > 0")
    chunk = np.floor(np.cumsum(d.mean(axis=0)) / chunk_s).astype(int)
    _, index = np.unique(chunk, return_inverse=True)
    sums = np.zeros((d.shape[0], int(index.max()) + 1))
    np.add.at(sums, (slice(None), index), d)
    sums = sums[:, sums.mean(axis=0) >= 0.5 * chunk_s]
    totals = d.sum(axis=1)
    step_cv = float(totals.std(ddof=1) / totals.mean())
    s, c = sums.shape
    if c < 2:
        return Jitter(s, d.shape[1], c, step_cv, math.nan)
    g = sums.sum(axis=1) / sums.sum(axis=1).mean()
    r = sums / (sums.mean(axis=0)[None, :] * g[:, None]) - 1.0
    return Jitter(s, d.shape[1], c, step_cv, float(np.sqrt((r ** 2).sum() / ((s - 1) * (c - 1)))))


def jitter_table(paths: Sequence[str | Path], chunk_s: float = CHUNK_S) -> pd.DataFrame:
    """One row per trace: its device, steps, kernels, chunks, the cv of its steps' summed
    kernel time and the independent chunk jitter; a trace whose steps differ is a row with
    ``measured`` false and the reason."""
    rows = []
    for path in paths:
        if not Path(path).is_file():
            raise InputError("Kineto trace not found", path=path)
        try:
            k = step_kernels(path)
        except InputError as exc:
            rows.append({"trace": Path(path).name, "device": "", "measured": False,
                         "why": str(exc).split(": ", 1)[-1]})
            continue
        j = chunk_jitter(k.durations_s, chunk_s)
        rows.append({"trace": Path(path).name, "device": k.device, "measured": True,
                     "why": "", "steps": j.steps, "kernels": j.kernels, "chunks": j.chunks,
                     "chunk_s": chunk_s, "step_kernel_cv": j.step_cv,
                     "independent_cv": j.independent_cv})
    return pd.DataFrame(rows)


def study(fit: Sequence[str | Path], validation: Sequence[str | Path],
          chunk_s: float = CHUNK_S) -> pd.DataFrame:
    """The fit and validation tables in one frame (column ``role``), then one ``fit`` row
    (the largest independent jitter of the measured fit traces: the value the at-scale study
    applies) and one ``validation`` row per measured validation trace with the fit value's
    error against it (``fit / measured - 1``)."""
    parts = []
    for role, paths in (("fit", fit), ("validation", validation)):
        table = jitter_table(paths, chunk_s)
        if not len(table):
            continue
        parts.append(table.assign(role=role))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    fitted = frame[(frame.get("role") == "fit") & frame.get("measured", False).astype(bool)]
    if not len(fitted) or not fitted["independent_cv"].notna().any():
        raise InputError("no fit trace could be measured (three identical profiled steps "
                         "needed)", field="--fit")
    value = float(fitted["independent_cv"].max())
    frame["fit_cv"] = value
    measured = frame["measured"].astype(bool) & (frame["role"] == "validation")
    frame["error_pct"] = np.where(measured, 100 * (value / frame["independent_cv"] - 1),
                                  np.nan)
    return frame[["role", "trace", "device", "measured", "why", "steps", "kernels", "chunks",
                  "chunk_s", "step_kernel_cv", "independent_cv", "fit_cv", "error_pct"]]


@dataclass(frozen=True)
class UnitJitter:
    """The per-unit jitter the at-scale study applies: the fitted cv, the largest one
    measured on the validation traces, and where they come from; for the record, the fit's
    worst |error| on the validation traces and the largest step-to-step cv of a fit trace's
    summed kernel time."""

    cv: float
    validation_cv: float
    source: str
    validation_error_pct: float = math.nan
    step_kernel_cv: float = math.nan

    def __post_init__(self) -> None:
        for name, value in (("cv", self.cv), ("validation_cv", self.validation_cv)):
            if not (0.0 <= value < 1.0) and not (name == "validation_cv" and math.isnan(value)):
                raise InputError(f"per-unit jitter {name} {value!r} is outside [0, 1)",
                                 field=name)


def load_unit_jitter(path: str | Path) -> UnitJitter:
    """The :class:`UnitJitter` of a table written by :func:`study` (``gradsched study
    unit-jitter``)."""
    frame = read_csv_frame(path, required=("role", "fit_cv", "independent_cv", "measured"))
    fit = frame["fit_cv"].dropna().unique()
    if len(fit) != 1:
        raise InputError("expected one fit_cv value", path=path, field="fit_cv")
    measured = frame["measured"].astype(bool)
    val = frame[(frame["role"] == "validation") & measured]
    fits = frame[(frame["role"] == "fit") & measured]
    vcv = float(val["independent_cv"].max()) if len(val) else math.nan
    err = (float(val["error_pct"].abs().max()) if len(val) and "error_pct" in val
           else math.nan)
    step = (float(fits["step_kernel_cv"].max()) if "step_kernel_cv" in fits and len(fits)
            else math.nan)
    return UnitJitter(float(fit[0]), vcv, f"largest of {len(fits)} fit traces "
                      f"({Path(path).name})", validation_error_pct=err, step_kernel_cv=step)
