"""The compute trace of one rank's step: rows, sizes and the sidecar (CPU-bound check,
DDP bucket check; package docstring, items 9-10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.importers import WarningSink
from gradsched.traces.importers.kineto_gpu.host import HOST_METHOD
from gradsched.traces.importers.kineto_gpu.options import (
    IMPORTER,
    IMPORTER_VERSION,
    Options,
    provenance,
)
from gradsched.traces.importers.kineto_gpu.params import param_sizes, read_param_table
from gradsched.traces.importers.kineto_gpu.step import GpuStep


def build_compute(gstep: GpuStep, options: Options, path: str | Path, sink: WarningSink
                  ) -> ComputeTrace:
    """The compute trace of one rank's step (checked and validated)."""
    table = read_param_table(options.params) if options.params else None
    names, numel, nbytes, sizes_from = param_sizes(gstep.frame, table, gstep.label,
                                              options.params)
    frame = pd.DataFrame({
        "name": names, "layer": gstep.frame["layer"].astype(int), "numel": numel,
        "bytes": nbytes, "forward_s": gstep.frame["forward_s"].astype(float),
        "backward_s": gstep.frame["backward_s"].astype(float),
        "ready_order": gstep.frame["ready_order"].astype(int),
    })
    if gstep.host is not None:
        for col in HOST_COLUMNS:
            frame[col] = gstep.frame[col].to_numpy()
    batch = options.batch_size or gstep.batch_size
    if batch is None:
        raise InputError(f"batch size not recorded: {gstep.batch_note}; pass batch_size "
                         "(--batch-size)", path=gstep.label, field="batch_size")
    totals = {k: round(v, 9) if isinstance(v, float) else v  # ns resolution
              for k, v in gstep.totals.items()}
    share = totals["gpu_busy_share"]
    cpu_bound = share < options.cpu_bound_share
    if cpu_bound:
        sink.warn(f"{_step_name(options, gstep)} is CPU-bound: the GPU is busy "
                  f"{totals['gpu_busy_s'] * 1e3:.1f} ms of the step's GPU period "
                  f"{totals['gpu_period_s'] * 1e3:.1f} ms "
                  f"({share:.0%} < {options.cpu_bound_share:.0%}); "
                  "the rows are GPU kernel times, but the run's iteration time was set by the "
                  "CPU (cpu_bound in the sidecar)")
    for message in gstep.warnings:
        sink.warn(message)
    buckets = _bucket_check(gstep, frame, sink)
    elem = {b // n for b, n in zip(nbytes, numel, strict=True)}
    meta = {
        "kind": "compute", "model": options.model, "batch_size": int(batch),
        "device": options.device or gstep.device or "not recorded in the trace",
        "dtype": {4: "fp32", 2: "fp16/bf16", 8: "fp64"}.get(next(iter(elem)), "mixed")
        if len(elem) == 1 else "mixed",
        "world_size": int(options.world_size or gstep.world_size or 1),
        "software": _software(gstep.header),
        "capture_method": ("PyTorch profiler (Kineto) GPU trace; per-gradient GPU kernel time "
                           "of one ProfilerStep (gradsched kineto-gpu importer)"
                           if options.step_range is None else
                           "PyTorch profiler (Kineto) GPU trace; per-gradient GPU kernel time "
                           f"of one {options.step_range}N range (gradsched kineto-gpu "
                           "importer)"),
        "iterations": 1, "date": options.date, "source": provenance(options, gstep.label),
        "iteration_s": gstep.step_s,
        "forward_backward_s": round(totals["forward_s"] + totals["backward_s"], 9),
        "step": gstep.step, "steps_in_trace": gstep.steps,
        "step_choice": ("given (step option)" if options.step is not None else
                        "lower-median-length step with a backward, the first profiled step "
                        "left out when three or more have one"),
        "rank": gstep.rank, "forward_total_s": totals["forward_s"],
        "backward_total_s": totals["backward_s"], "forward_tail_s": totals["forward_tail_s"],
        "backward_tail_s": totals["backward_tail_s"],
        "other_kernel_s": totals["other_kernel_s"], "gpu_busy_s": totals["gpu_busy_s"],
        "gpu_period_s": totals["gpu_period_s"],
        **_attribution(totals),
        "gpu_busy_share": share, "cpu_bound": cpu_bound,
        "cpu_bound_share": options.cpu_bound_share, "parameter_sizes": sizes_from,
        "forward_measured": True, "original_file": Path(path).name,
        "importer": IMPORTER, "importer_version": IMPORTER_VERSION,
        "notes": _notes(options, gstep),
        "warnings": sink.for_meta(),
    }
    if buckets:
        meta["ddp_buckets"] = buckets
    if gstep.host is not None:
        meta["host"] = {**gstep.host, "method": HOST_METHOD}
    if options.hardware:
        meta["hardware"] = options.hardware
    if gstep.label.startswith(f"{path}:"):
        meta["archive_member"] = gstep.label[len(str(path)) + 1:]
    return ComputeTrace.from_frame(frame, meta)


HOST_COLUMNS = ("host_forward_s", "host_backward_s", "forward_launches", "backward_launches")


def _attribution(totals: dict[str, Any]) -> dict[str, Any]:
    """How much of each pass's kernel time sits on a layer. Forward: the rows over the
    forward window's kernels (``forward_attributed_share``), and the part placed by the
    trace's own links, i.e. less the tail after the last parameter-owning op (the loss, a
    tied output head) that the rule puts on the last layer (``forward_linked_share``).
    Backward: the rows over the rows plus the tail after the last gradient."""
    fwd_window, bwd_all = totals["forward_window_s"], totals["backward_s"] + totals[
        "backward_tail_s"]

    def share(part: float, whole: float) -> float:
        return round(part / whole, 9) if whole else 0.0

    return {
        "forward_method": totals["forward_method"],
        "forward_window_s": fwd_window, "forward_in_layer_s": totals["forward_in_layer_s"],
        "forward_attributed_share": share(totals["forward_s"], fwd_window),
        "forward_linked_share": share(totals["forward_s"] - totals["forward_tail_s"],
                                      fwd_window),
        "backward_attributed_share": share(totals["backward_s"], bwd_all),
    }


def _bucket_check(gstep: GpuStep, frame: pd.DataFrame, sink: WarningSink
                  ) -> dict[str, Any] | None:
    """Do the step's all-reduce sizes partition the gradients taken in ready order?"""
    sizes = [c.nelems for c in gstep.collectives if c.collective == "all_reduce"]
    if not sizes or any(n is None for n in sizes):
        return None
    ready = frame.sort_values("ready_order")["numel"].to_numpy()
    bounds = np.cumsum(ready)
    counts = []
    done = 0
    for total in np.cumsum(sizes):
        hit = np.flatnonzero(bounds == total)
        if not hit.size:
            sink.warn(f"the all-reduce sizes {sizes} do not partition the gradients taken in "
                      "ready order (DDP fills buckets in reverse registration order, which "
                      "can differ from the ready order; or not these parameters' buckets, or "
                      "a wrong parameter table)")
            return {"elements": sizes, "partition_ready_order": False}
        counts.append(int(hit[0]) + 1 - done)
        done = int(hit[0]) + 1
    if done != len(ready):
        sink.warn(f"the all-reduces cover {done} of {len(ready)} gradients")
    return {"elements": sizes, "partition_ready_order": done == len(ready),
            "gradients_per_bucket": counts}


def _software(header: dict[str, Any]) -> dict[str, Any]:
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"),
                                                        dict) else {}
    out: dict[str, Any] = {"framework": "PyTorch (Kineto profiler trace)"}
    if header.get("schemaVersion") is not None:
        out["trace_schema_version"] = header["schemaVersion"]
    for key in ("backend", "nccl_version"):
        if info.get(key):
            out[key] = info[key]
    return out


def _step_name(options: Options, gstep: GpuStep) -> str:
    return (f"ProfilerStep#{gstep.step}" if options.step_range is None
            else f"{options.step_range}{gstep.step}")


def _notes(options: Options, gstep: GpuStep) -> str:
    text = (f"Rows: one per gradient (AccumulateGrad) of {_step_name(options, gstep)}, forward "
            "order. backward_s = GPU kernel time (kernels, memcpy, memset; NCCL excluded) of "
            "the backward ops launched after the previous AccumulateGrad up to this one; "
            "forward_s = forward kernel time since the previous parameter-owning forward op "
            "(on the op's first row; the loss's kernels on the last op). Timings are kernel "
            "durations, not wall time: gaps in which the GPU waited for the CPU are not in "
            "them. Within one forward op, parameters are ordered as the reverse of their "
            "accumulation; two equal-sized parameters of one op (a norm's weight and bias) "
            "cannot be told apart by the trace.")
    return f"{text} {options.note}" if options.note else text
