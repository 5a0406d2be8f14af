"""Forward time as an explicit, labelled input for traces that did not measure it.

The MG-WFBP authors' B-Caffe logs hold backward times only (their importer writes
``forward_s = 0`` with ``forward_measured: false``). A replay of such a trace with no
forward pass gives DeAR's all-gathers and ByteScheduler's per-layer updates nothing to
overlap, so their ranking against MG-WFBP depends on an assumption the trace cannot
settle. The replay therefore states one: ``forward = ratio x backward`` per
tensor row, with the default :data:`DEFAULT_FORWARD_RATIO` = 0.5, what the MG-WFBP
authors' own simulator assumes (a second-hand figure: the simulator's code is not in
B-Caffe's repository, which we searched, so it is not re-verified here),
and ``0`` (the source as written) as a sensitivity case.
A trace whose forward was measured is never changed.
"""

from __future__ import annotations

import math

from gradsched.errors import ConfigError
from gradsched.traces.bundle import ComputeTrace

DEFAULT_FORWARD_RATIO = 0.5
"""Forward time / backward time assumed where a trace did not measure forward (MG-WFBP's
simulator)."""


def forward_measured(trace: ComputeTrace) -> bool:
    """False where the sidecar says so (``forward_measured: false``) or every row's forward
    time is 0 (no real network computes its forward pass in no time)."""
    if trace.meta.get("forward_measured") is False:
        return False
    return bool((trace.frame["forward_s"] > 0).any())


def check_ratio(ratio: float) -> float:
    """A finite ratio in [0, 10]."""
    if not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and 0 <= ratio <= 10):
        raise ConfigError(f"--forward-ratio must be a finite number in [0, 10], got {ratio!r}")
    return float(ratio)


def with_forward(trace: ComputeTrace, ratio: float | None) -> ComputeTrace:
    """``trace`` with the stated forward assumption where it did not measure forward.

    ``ratio=None`` means the default (:data:`DEFAULT_FORWARD_RATIO`). A trace that measured
    its forward is returned as is; asking it for an explicit ratio is an error (the
    measurement wins, silently replacing it would not)."""
    if forward_measured(trace):
        if ratio is not None:
            raise ConfigError(f"{trace.stem}: forward_s was measured; --forward-ratio applies "
                              "only to traces that did not measure it")
        return trace
    r = DEFAULT_FORWARD_RATIO if ratio is None else check_ratio(ratio)
    frame = trace.frame.assign(forward_s=trace.frame["backward_s"] * r)
    meta = dict(trace.meta)
    meta["forward_assumption"] = (
        f"forward_s = {r:g} x backward_s per row (not measured by the source; "
        f"{DEFAULT_FORWARD_RATIO:g} is the MG-WFBP simulator's assumption, 0 the trace as "
        "written)")
    meta["forward_ratio"] = r
    out = ComputeTrace.from_frame(frame, meta)
    out.path = trace.path
    return out
