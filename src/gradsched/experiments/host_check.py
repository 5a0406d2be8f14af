"""The host-aware replay against hook-free CUDA-event iterations (``gradsched study
host-check``).

Each case is a compute trace with host columns (``gradsched import kineto --host`` of a
hook-free profiled step) and the CUDA-event medians of forward and backward of the same
process without the profiler. Both replays run the trace at world size 1 (no
communication, no update): the single-stream replay (``forward_s`` + ``backward_s``, the
kernel times) and the host-aware one (:mod:`gradsched.replay.host`). Errors are
``predicted / measured - 1``.

``host_excess_us_per_launch``: the trace's host time less the measured iteration, per
launch of the trace (its ``forward_launches`` + ``backward_launches``). Where the
unprofiled iteration is host-bound, the measured time is the host's own, so this is what
the profiler added per launch; were that a constant of the profiler, it would be about the
same in every host-bound configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.plan import Bucket, Plan
from gradsched.replay import ReplayOptions, replay
from gradsched.replay.host import DEFAULT_LAUNCH_QUEUE, host_iteration
from gradsched.replay.prep import plan_items, trace_arrays
from gradsched.traces.bundle import ComputeTrace

COLUMNS = ("config", "gpu_busy_share", "kernel_ms", "host_ms", "measured_ms",
           "single_stream_ms", "host_aware_ms", "single_stream_error_pct",
           "host_aware_error_pct", "device_wait_ms", "measured_forward_ms",
           "host_aware_forward_ms", "launch_queue_launches", "launches",
           "host_excess_us_per_launch")


@dataclass(frozen=True)
class Case:
    """One configuration: its trace and its measured forward and backward (s)."""

    name: str
    trace: Path
    forward_s: float
    backward_s: float


def cases_from_summary(traces: list[Path], summary: Path, threads: str = "threads8"
                       ) -> list[Case]:
    """Cases from compute traces named ``<stem>.csv`` and a summary (``kineto-steps-
    summary.json``: ``{stem: {cuda_event_medians_s: {threads8: {forward, backward}}}}``)."""
    table = read_json(summary)
    out = []
    for path in traces:
        stem = Path(path).stem
        try:
            med = table[stem]["cuda_event_medians_s"]
            med = med.get(threads, med)
            out.append(Case(stem, Path(path), float(med["forward"]), float(med["backward"])))
        except (KeyError, TypeError) as exc:
            raise InputError(f"no CUDA-event forward and backward for '{stem}' ({exc})",
                             path=summary) from None
    return out


def _launches(trace: ComputeTrace) -> int:
    """The trace's launches in forward and backward (GPU activities the host issued); a
    trace without the launch columns counts one per row and phase, as the host-aware
    replay does (:mod:`gradsched.replay.host`)."""
    frame = trace.frame
    return sum(int(frame[col].sum()) if col in frame.columns else len(frame)
               for col in ("forward_launches", "backward_launches"))


def host_check(cases: list[Case], launch_queue: int = DEFAULT_LAUNCH_QUEUE) -> pd.DataFrame:
    """One row per case: measured against both replays (module docstring)."""
    model = AlphaBetaModel(0.0, 0.0)
    rows = []
    for case in cases:
        trace = ComputeTrace.load(case.trace)
        # one rank: the plan's one all-reduce takes no time (plan_items)
        plan = Plan(algorithm="syncsgd", buckets=(Bucket(tuple(trace.names)),))
        single = replay(trace, plan, model, 1, ReplayOptions(iterations=2)).iteration_s
        arrays = trace_arrays(trace)
        it = host_iteration(trace, arrays, plan, plan_items(arrays, plan, model, 1, 0.0),
                            launch_queue)
        measured = case.forward_s + case.backward_s
        launches = _launches(trace)
        rows.append({
            "config": case.name,
            "gpu_busy_share": float(trace.meta.get("gpu_busy_share", float("nan"))),
            "kernel_ms": (arrays.forward_s + arrays.backward_s) * 1e3,
            "host_ms": it.host_s * 1e3,
            "measured_ms": measured * 1e3,
            "single_stream_ms": single * 1e3,
            "host_aware_ms": it.iteration_s * 1e3,
            "single_stream_error_pct": (single / measured - 1) * 100,
            "host_aware_error_pct": (it.iteration_s / measured - 1) * 100,
            "device_wait_ms": it.device_wait_s * 1e3,
            "measured_forward_ms": case.forward_s * 1e3,
            "host_aware_forward_ms": it.forward_end_s * 1e3,
            "launch_queue_launches": launch_queue,
            "launches": launches,
            "host_excess_us_per_launch": (it.host_s - measured) * 1e6 / launches,
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def summary(frame: pd.DataFrame) -> dict[str, float]:
    """Median and worst |error| (%) of both replays."""
    out = {}
    for name in ("single_stream", "host_aware"):
        err = frame[f"{name}_error_pct"].abs()
        out[f"{name}_median_abs_error_pct"] = float(err.median())
        out[f"{name}_worst_abs_error_pct"] = float(err.max())
    return out


__all__ = ["COLUMNS", "Case", "cases_from_summary", "host_check", "summary"]
