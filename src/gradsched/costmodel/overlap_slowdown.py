"""What overlap costs the GPU: compute progresses at ``1/s`` while an NCCL kernel runs beside
it, one ``s`` per GPU generation, fitted on some public Kineto traces and validated on
others (:mod:`gradsched.traces.overlap_kernels` measures the kernel groups).

**Physical cause.** An NCCL kernel runs one thread block per channel, each block resident on
its own SM for the whole collective (``ncclLaunchKernel`` launches
``grid = {nChannels, 1, 1}``: NVIDIA/nccl ``src/enqueue/enqueue.cc`` L1889-1893 at
12df1a11afad322be5a204a2db890161cbf8131d), and it streams its buffers through the same
HBM. A compute
kernel of ``B`` blocks on a GPU of ``N`` SMs loses the ``k`` SMs the NCCL kernel holds: the
zero-parameter prediction (:func:`physical_slowdown`) is ``min(B, N) / min(B, N - k)`` (1
for a kernel that fits in the free SMs); memory-bandwidth sharing comes on top and is not
predicted, only measured.

**Fitted value.** Per generation, ``s`` = the median of the kept groups' slowdowns weighted
by their overlapped reference time, on the fit traces; at least 1 (a faster kernel beside
NCCL is noise, not a physical effect).

**Error** of a slowdown on a set of groups: the weighted (by overlapped reference time)
median of ``|d_hat / d - 1|`` with ``d_hat = d0 / (1 - f + f / s)`` the predicted overlapped
duration (:func:`~gradsched.traces.overlap_kernels.predicted_duration`) and ``d`` the
measured median; reported for the fitted ``s``, for no effect (``s = 1``) and for the
physical prediction, on the fit traces and on the validation traces.

**Generations.** The committed model (:data:`MODEL_PATH`, written by ``gradsched study
overlap-slowdown``) holds the measured generations. A GPU trace of an unmeasured
generation that shares the measured one's kind of NCCL deployment (H100, H200, GH200:
:data:`BORROWED`) gets the nearest measured generation's value, labelled as borrowed; any
other GPU (K80, consumer cards, a GPU not stated) gets no effect and a note. CPU traces get
nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import ConfigError, InputError
from gradsched.io import read_json
from gradsched.traces.overlap_kernels import measure_trace, predicted_duration

MODEL_PATH = Path(__file__).with_name("overlap_slowdown.json")
"""The committed per-generation model (package data)."""

GENERATIONS: tuple[tuple[str, str], ...] = (
    ("GH200", r"GH200|GH-96"), ("H200", r"H200"), ("H100", r"H100"),
    ("A100", r"A100"), ("V100", r"V100"), ("K80", r"K80"))
"""Generation name and the pattern a device string matches (first match wins)."""

BORROWED: dict[str, str] = {"H100": "A100", "H200": "A100", "GH200": "A100"}
"""Unmeasured generation -> the measured one whose value it gets (labelled as borrowed):
the nearest data-centre generation with NVLink/NVSwitch NCCL deployments."""

OVERLAP_CHOICES = ("auto", "off")

MAX_SLOWDOWN = 1e6
"""Largest slowdown accepted: the replay's own bound (``gradsched.replay.engine``)."""


def generation_of(device: str) -> str | None:
    """The GPU generation a device string names (``NVIDIA A100-PG509-200`` -> ``A100``)."""
    for name, pattern in GENERATIONS:
        if re.search(pattern, device, flags=re.IGNORECASE):
            return name
    return None


def physical_slowdown(blocks: Any, nccl_blocks: Any, sm_count: Any) -> np.ndarray:
    """``min(B, N) / min(B, N - k)`` per row: the SM share the NCCL kernel's ``k`` blocks
    (one per channel, one SM each) take from a compute kernel of ``B`` blocks on ``N`` SMs."""
    b = np.asarray(blocks, dtype=float)
    n = np.asarray(sm_count, dtype=float)
    free = np.maximum(n - np.asarray(nccl_blocks, dtype=float), 1.0)
    return np.minimum(b, n) / np.maximum(np.minimum(b, free), 1.0)


def weighted_median(values: Any, weights: Any) -> float:
    """The smallest value at which the cumulative weight reaches half the total."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if v.size == 0 or not w.sum() > 0:
        return math.nan
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    return float(v[order][np.searchsorted(cum, cum[-1] / 2)])


def duration_error(groups: pd.DataFrame, slowdown: Any) -> float:
    """Weighted median ``|d_hat / d - 1|`` of the groups' overlapped durations (module
    docstring); ``slowdown`` a scalar or one value per group."""
    if groups.empty:
        return math.nan
    s = np.broadcast_to(np.asarray(slowdown, dtype=float), (len(groups),))
    predicted = predicted_duration(groups["reference_s"].to_numpy(float),
                                   groups["overlap_fraction"].to_numpy(float), s)
    error = np.abs(predicted / groups["overlapped_s"].to_numpy(float) - 1)
    return weighted_median(error, groups["weight_s"])


def _r(x: float, digits: int = 4) -> float | None:
    return None if not math.isfinite(x) else round(float(x), digits)


def _errors(groups: pd.DataFrame, fitted: float) -> dict[str, Any]:
    phys = physical_slowdown(groups["grid_blocks"], groups["nccl_blocks"], groups["sm_count"])
    return {"groups": len(groups), "overlapped_s": _r(groups["weight_s"].sum(), 6),
            "measured_slowdown": _r(weighted_median(groups["slowdown"], groups["weight_s"])),
            "error_fitted": _r(duration_error(groups, fitted)),
            "error_no_effect": _r(duration_error(groups, 1.0)),
            "error_physical": _r(duration_error(groups, phys))}


def fit_generation(fit: pd.DataFrame, validation: pd.DataFrame) -> dict[str, Any]:
    """One generation's model entry from its fit and validation groups (module docstring)."""
    if fit.empty:
        raise InputError("no kept kernel groups in the fit traces: nothing to fit")
    raw = weighted_median(fit["slowdown"], fit["weight_s"])
    value = max(raw, 1.0)
    sms = int(fit["sm_count"].median())
    nccl = int(fit["nccl_blocks"].median())
    return {"slowdown": _r(value), "slowdown_raw": _r(raw),
            "devices": sorted(set(fit["device"]) | set(validation["device"])),
            "sm_count": sms, "nccl_blocks_median": nccl,
            "physical_slowdown_full_gpu": _r(float(physical_slowdown(sms, nccl, sms))),
            "fit": _errors(fit, value),
            "validation": _errors(validation, value) if not validation.empty else None}


def fit_model(groups: pd.DataFrame, sources: list[dict[str, str]]) -> dict[str, Any]:
    """The per-generation model from measured groups with ``generation`` and ``role``
    (``fit`` / ``validation``) columns; ``sources`` lists what each trace part was used for
    (the model's provenance)."""
    generations: dict[str, Any] = {}
    for gen in sorted(set(groups["generation"])):
        part = groups[groups["generation"] == gen]
        entry = fit_generation(part[part["role"] == "fit"], part[part["role"] == "validation"])
        entry["sources"] = [s for s in sources if s["generation"] == gen]
        generations[gen] = entry
    return {"what": "compute slowdown while an NCCL kernel runs beside it, per GPU "
                    "generation (gradsched.costmodel.overlap_slowdown)",
            "produced_by": "gradsched study overlap-slowdown",
            "generations": generations,
            "borrowed": {k: v for k, v in BORROWED.items() if v in generations}}


def summary_frame(model: dict[str, Any]) -> pd.DataFrame:
    """One row per (generation, role): the results table the paper formats."""
    rows = []
    for gen, entry in sorted(model["generations"].items()):
        for role in ("fit", "validation"):
            errs = entry.get(role)
            if not errs:
                continue
            traces = "; ".join(f"{s['trace']}" + (f" ({s['part']})" if s["part"] != "all"
                                                   else "")
                               for s in entry["sources"] if s["role"] == role)
            rows.append({"generation": gen, "role": role, "traces": traces,
                         "slowdown": entry["slowdown"],
                         "physical_slowdown": entry["physical_slowdown_full_gpu"],
                         "sm_count": entry["sm_count"],
                         "nccl_blocks": entry["nccl_blocks_median"], **errs})
    for gen, base in sorted(model.get("borrowed", {}).items()):
        rows.append({"generation": gen, "role": f"borrowed from {base}", "traces": "",
                     "slowdown": model["generations"][base]["slowdown"]})
    return pd.DataFrame(rows)


def load_model(path: str | Path | None = None) -> dict[str, Any]:
    """The per-generation model (the committed one by default)."""
    path = Path(path) if path is not None else MODEL_PATH
    if not path.is_file():
        raise InputError("overlap-slowdown model not found", path=path)
    model = read_json(path, "overlap-slowdown model not found")
    try:
        if not isinstance(model["generations"], dict):
            raise TypeError
    except (KeyError, TypeError):
        raise InputError("not an overlap-slowdown model (gradsched study overlap-slowdown "
                         "writes one)", path=path) from None
    return model


@dataclass(frozen=True)
class OverlapChoice:
    """The slowdown a replay applies and why: ``value`` (1 = none), the generation, where
    the value comes from, and the one-line note to print (empty: nothing to say)."""

    value: float
    generation: str | None
    source: str
    note: str


NONE = OverlapChoice(1.0, None, "", "")


def parse_setting(text: str) -> str | float:
    """``auto``, ``off`` or a slowdown in [1, MAX_SLOWDOWN] (``--overlap-slowdown``)."""
    if text in OVERLAP_CHOICES:
        return text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 1.0 <= value <= MAX_SLOWDOWN):
        raise ConfigError(f"--overlap-slowdown must be auto, off or a number in [1, "
                          f"{MAX_SLOWDOWN:g}] (compute speed divisor while a collective "
                          f"runs), got {text!r}")
    return value


def trace_device(meta: dict[str, Any]) -> str:
    """The device a compute trace's metadata names (``device``, else ``machine.gpu``)."""
    device = meta.get("device") or (meta.get("machine") or {}).get("gpu") or ""
    return str(device)


def is_gpu_trace(meta: dict[str, Any]) -> bool:
    """Whether a compute trace was measured on a GPU (its device is not a CPU)."""
    device = trace_device(meta).strip().lower()
    return bool(device) and not device.startswith("cpu")


def resolve(meta: dict[str, Any], setting: str | float = "auto",
            model: dict[str, Any] | None = None) -> OverlapChoice:
    """The slowdown for a replay of a compute trace with this metadata: ``off`` -> none;
    a number -> that value; ``auto`` -> the trace's GPU generation's (module docstring)."""
    if setting == "off":
        return NONE
    if not isinstance(setting, str):
        return OverlapChoice(float(setting), None, "--overlap-slowdown",
                             f"overlap slowdown {float(setting):g} (given)")
    if not is_gpu_trace(meta):
        return NONE
    device = trace_device(meta)
    gen = generation_of(device)
    model = model if model is not None else load_model()
    gens = model["generations"]
    if gen in gens:
        value, base, label = gens[gen]["slowdown"], gen, f"fitted on {gen}"
    elif gen in model.get("borrowed", {}):
        base = model["borrowed"][gen]
        value = gens[base]["slowdown"]
        label = f"{gen} unmeasured: the {base} value, fitted on {base}"
    else:
        what = gen or f"device {device!r}"
        return OverlapChoice(1.0, gen, "", f"overlap slowdown: none applied ({what} has no "
                             "measurement of compute beside NCCL kernels)")
    entry = gens[base]
    val = entry.get("validation") or {}
    source = (f"{label} in public Kineto traces; held-out validation error "
              f"{_pct(val.get('error_fitted'))} vs {_pct(val.get('error_no_effect'))} "
              "without")
    return OverlapChoice(float(value), gen, source,
                         f"overlap slowdown {float(value):g} for {gen} ({source}); "
                         "--overlap-slowdown off to disable")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


@dataclass(frozen=True)
class OverlapSource:
    """One trace (file or rank archive), or one half of it, and what it is used for."""

    generation: str
    role: str  # "fit" or "validation"
    part: str
    trace: str


def measure_and_fit(sources: list[OverlapSource]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Measure every source's kernel groups and fit the model: ``(groups, model)``. Each
    group's device must be of its source's generation (checked: a mislabelled trace would
    fit the wrong generation)."""
    frames = []
    for src in sources:
        if src.role not in ("fit", "validation"):
            raise ConfigError(f"role must be fit or validation, got {src.role!r}")
        frame = measure_trace(src.trace, src.part)
        wrong = sorted({d for d in frame["device"] if generation_of(d) != src.generation})
        if wrong:
            raise InputError(f"its GPU {wrong[0]!r} is not a {src.generation}",
                             path=src.trace)
        frames.append(frame.assign(generation=src.generation, role=src.role,
                                   source=Path(src.trace).name))
    groups = pd.concat(frames, ignore_index=True)
    provenance = [{"generation": s.generation, "role": s.role, "part": s.part,
                   "trace": s.trace, "groups": len(f)}
                  for s, f in zip(sources, frames, strict=True)]
    return groups, fit_model(groups, provenance)
