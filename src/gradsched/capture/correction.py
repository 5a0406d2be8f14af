"""Rows that do not distort: rescale a hooked capture to the hook-free iteration of its run.

Per-layer hooks add host work to every layer. Where the GPU outruns the host (many small
kernels: bf16 transformers, deep CNNs at small batch) that work lengthens the iteration, and
the hook-delimited rows overstate compute (on one H200: bert-large bf16 +38 %, resnet101
+30 %; ``data/h200/README.md``). The same run also times hook-free iterations
(``forward_nohooks_s``, ``backward_nohooks_s``: CUDA events around forward and backward with
no hooks). The correction keeps the rows' split and scales it so that each pass sums to the
hook-free median:

* ``forward_s`` (and its percentiles) x ``forward_nohooks_s / sum(forward_s)``;
* ``backward_s`` (and its percentiles) x ``backward_nohooks_s / sum(backward_s)``;
* ``ready_order``, names and sizes are unchanged, and so are the sidecar's keys about the
  hooked measurement (``*_rows_sum_s``, ``backward_rows_rel_error``, ...): the corrected
  sums and errors are in ``correction``.

What the correction cannot know: whether the hooks slowed every layer alike (the split is the
hooked one), and where the model is host-bound, which hook-free iteration is "the" one: two
processes of the same launch-bound model differ by up to 1.6x. So the sidecar's
``correction`` records the hook-free samples it was given (the run's own median and range,
and other processes' medians), their spread (max/min of fwd+bwd, as an interval the replay
can carry), the GPU busy fraction where a profiled iteration measured it, and ``host_bound``
with its rule: the project's one definition (:mod:`gradsched.traces.host_bound`, the
kineto-gpu importer's busy share below 0.8) applied to the busy share given, and not judged
(``None``) without one.

Pure (no torch): used by ``capture compute`` on CUDA and by ``gradsched traces correct``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.limits import MAX_SECONDS, in_range, is_real
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.host_bound import CPU_BOUND_SHARE, RULE, is_host_bound

METHOD = "rescale-to-hook-free"
TOLERANCE = 0.03


@dataclass
class HookFree:
    """Hook-free forward and backward medians (s) of one set of iterations."""

    label: str
    forward_s: float
    backward_s: float


@dataclass
class CorrectionInputs:
    """What the correction is given besides the trace."""

    samples: list[HookFree] = field(default_factory=list)
    gpu_busy: float | None = None
    gpu_busy_source: str | None = None
    tolerance: float = TOLERANCE
    derived_from: str | None = None


def read_hook_free_summary(path: str | Path, stem: str) -> list[HookFree]:
    """The hook-free medians that the summary JSON ``path`` holds for the trace ``stem``
    (``{stem: {"cuda_event_medians_s": {label: {"forward": s, "backward": s}}}}``, or one
    ``{"forward", "backward"}`` without labels). Every median is checked where it is read:
    a JSON number (not text, a list or a boolean), positive and at most
    :data:`~gradsched.limits.MAX_SECONDS`; anything else is refused naming the file and
    the field, never turned into a float later."""
    data = read_json(path)
    entry = data.get(stem)
    if entry is None:
        return []
    if not isinstance(entry, dict):
        raise InputError("must be an object", path=path, field=stem)
    meds = entry.get("cuda_event_medians_s")
    where = f"{stem}.cuda_event_medians_s"
    if meds is None:
        return []
    if not isinstance(meds, dict):
        raise InputError("must be an object of {forward, backward} medians", path=path,
                         field=where)
    meds = {"": meds} if "forward" in meds else meds
    out = []
    for label, med in sorted(meds.items()):
        field_ = f"{where}.{label}" if label else where
        if not isinstance(med, dict) or "forward" not in med or "backward" not in med:
            raise InputError("must be an object with 'forward' and 'backward' medians (s)",
                             path=path, field=field_)
        times = []
        for key in ("forward", "backward"):
            value = med[key]
            if not is_real(value) or not in_range(value, 0, MAX_SECONDS, low_open=True):
                raise InputError(f"{value!r} is not a median in seconds (a JSON number "
                                 f"above 0 and at most {MAX_SECONDS:g} s)", path=path,
                                 field=f"{field_}.{key}")
            times.append(float(value))
        out.append(HookFree(f"{Path(path).name} {label}".strip(), times[0], times[1]))
    return out


def _need(meta: dict[str, Any], key: str) -> float:
    value = meta.get(key)
    if not isinstance(value, (int, float)) or value <= 0:
        raise InputError(f"the sidecar has no positive {key!r}: not a capture that timed "
                         "hook-free iterations (gradsched capture compute)", field=key)
    return float(value)


def _spread(samples: list[HookFree]) -> dict[str, Any]:
    totals = [s.forward_s + s.backward_s for s in samples]
    return {
        "samples": [{"label": s.label, "forward_s": s.forward_s, "backward_s": s.backward_s}
                    for s in samples],
        "forward_backward_min_s": min(totals), "forward_backward_max_s": max(totals),
        "max_over_min": max(totals) / min(totals),
    }


def host_bound(inputs: CorrectionInputs) -> dict[str, Any]:
    """``host_bound`` by the one definition (:mod:`gradsched.traces.host_bound`) on the GPU
    busy share given (the kineto-gpu importer's ``gpu_busy_share`` of a profiled step of the
    same configuration); ``None``, not judged, without one."""
    if inputs.gpu_busy is None:
        return {"host_bound": None,
                "host_bound_rule": "not judged: no GPU busy share given",
                "gpu_busy_fraction": None, "gpu_busy_source": None}
    if not 0.0 <= inputs.gpu_busy <= 1.0:
        raise InputError(f"GPU busy fraction {inputs.gpu_busy} is not in [0, 1]",
                         field="gpu_busy")
    return {"host_bound": is_host_bound(inputs.gpu_busy),
            "host_bound_rule": RULE.format(threshold=CPU_BOUND_SHARE),
            "gpu_busy_fraction": inputs.gpu_busy,
            "gpu_busy_source": inputs.gpu_busy_source or "given"}


def correct(trace: ComputeTrace, inputs: CorrectionInputs | None = None
            ) -> tuple[ComputeTrace, dict[str, Any]]:
    """The rescaled trace and its ``correction`` record (also in the new sidecar)."""
    inputs = inputs or CorrectionInputs()
    meta = dict(trace.meta)
    frame = trace.frame.copy()
    fwd_ref = _need(meta, "forward_nohooks_s")
    bwd_ref = _need(meta, "backward_nohooks_s")
    rows_fwd, rows_bwd = float(frame["forward_s"].sum()), float(frame["backward_s"].sum())
    if rows_fwd <= 0 or rows_bwd <= 0:
        raise InputError("the rows have no forward or no backward time to rescale",
                         field="forward_s/backward_s")
    f_fac, b_fac = fwd_ref / rows_fwd, bwd_ref / rows_bwd
    for col in ("forward_s", "forward_p10_s", "forward_p90_s"):
        if col in frame:
            frame[col] = frame[col] * f_fac
    for col in ("backward_s", "backward_p10_s", "backward_p90_s"):
        if col in frame:
            frame[col] = frame[col] * b_fac
    own = HookFree("this run (median of its hook-free iterations)", fwd_ref, bwd_ref)
    samples = [own, *inputs.samples]
    record: dict[str, Any] = {
        "method": METHOD,
        "hook_free_forward_s": fwd_ref, "hook_free_backward_s": bwd_ref,
        "forward_factor": f_fac, "backward_factor": b_fac,
        "raw_rows_forward_s": rows_fwd, "raw_rows_backward_s": rows_bwd,
        "raw_forward_rel_error": rows_fwd / fwd_ref - 1.0,
        "raw_backward_rel_error": rows_bwd / bwd_ref - 1.0,
        "tolerance": inputs.tolerance,
        "capture_overhead": meta.get("capture_overhead"),
        **host_bound(inputs),
        "spread": _spread(samples),
    }
    if inputs.derived_from:
        record["derived_from"] = inputs.derived_from
    new_fwd, new_bwd = float(frame["forward_s"].sum()), float(frame["backward_s"].sum())
    record["rows_forward_s"], record["rows_backward_s"] = new_fwd, new_bwd
    record["forward_rel_error"] = new_fwd / fwd_ref - 1.0
    record["backward_rel_error"] = new_bwd / bwd_ref - 1.0
    record["within_tolerance"] = (abs(record["forward_rel_error"]) <= inputs.tolerance
                                  and abs(record["backward_rel_error"]) <= inputs.tolerance)
    meta["correction"] = record
    meta["notes"] = (f"{meta.get('notes', '')} Rows rescaled to the hook-free iteration of "
                     f"the same run (correction: forward x {f_fac:.4g}, backward x "
                     f"{b_fac:.4g}; the per-row split is the hooked capture's).").strip()
    return ComputeTrace.from_frame(frame, meta), record
