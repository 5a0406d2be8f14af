"""The traces captured here: the CPU captures' inventory tables (compute and collective
sweeps), their hook overhead, the GPU captures' own record of what the hooks cost, and our
H200 validation (the Kineto import of the hook-free profiler traces and the corrected
captures), as tables and prose macros."""

from __future__ import annotations

import pandas as pd

from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, camel, latex_escape, number


def captured_compute_table(inv: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Compute traces captured here: size, iteration time, hook overhead, backward check."""
    cols = ["trace", "batch", "tensors", "gradients [MB]", "iteration [s]",
            "hook overhead [%]", "backward: rows [s]", "backward: measured [s]", "load [1 min]"]
    frame = inv[inv["kind"] == "compute"] if not inv.empty else inv
    if frame.empty:
        return pd.DataFrame(columns=cols), "lrrrrrrrr"
    out = pd.DataFrame({
        "trace": frame["trace"],
        "batch": frame["batch_size"].astype(int).astype(str),
        "tensors": frame["n_rows"].astype(int).astype(str),
        "gradients [MB]": (frame["bytes"] / 1e6).map(lambda v: fmt(v, 1)),
        "iteration [s]": frame["iteration_s"].map(lambda v: fmt(v, 2)),
        "hook overhead [%]": frame["hook_overhead_pct"].map(lambda v: fmt(v, 1)),
        "backward: rows [s]": frame["backward_rows_sum_s"].map(lambda v: fmt(v, 2)),
        "backward: measured [s]": frame["backward_measured_s"].map(lambda v: fmt(v, 2)),
        "load [1 min]": frame["load_avg_1min"].map(lambda v: fmt(v, 1)),
    })
    return out.reset_index(drop=True), "lrrrrrrrr"


def captured_comm_table(inv: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Collective sweeps captured here: what was measured and the peak bus bandwidth."""
    cols = ["trace", "collectives", "P [ranks]", "sizes [count]", "max size [MiB]",
            "peak busbw [MB/s]", "load [1 min]"]
    frame = inv[inv["kind"] == "comm"] if not inv.empty else inv
    if frame.empty:
        return pd.DataFrame(columns=cols), "llrrrrr"
    out = pd.DataFrame({
        "trace": frame["trace"],
        "collectives": frame["collectives"].str.replace("_", "-").str.replace(";", ", "),
        "P [ranks]": frame["world_size"].astype(int).astype(str),
        "sizes [count]": frame["n_rows"].astype(int).astype(str),
        "max size [MiB]": (frame["max_bytes"] / 2**20).map(lambda v: fmt(v, 0)),
        "peak busbw [MB/s]": (frame["peak_busbw_Bps"] / 1e6).map(lambda v: fmt(v, 1)),
        "load [1 min]": frame["load_avg_1min"].map(lambda v: fmt(v, 1)),
    })
    return out.reset_index(drop=True), "llrrrrr"


def cpu_capture_macros(inventory: pd.DataFrame | None) -> dict[str, str]:
    """The CPU compute traces captured here (``results/traces/captured.csv``, Table
    captured-compute): how many, in how many the hook overhead (iteration with hooks over
    without, minus one) came out negative -- the run-to-run noise is larger than the hooks'
    cost -- and its range and median, in percent."""
    keys = ["CaptureCpuNumTraces", "CaptureCpuHookNegativeTraces", "CaptureCpuHookMinPct",
            "CaptureCpuHookMaxPct", "CaptureCpuHookMedianPct"]
    out = dict.fromkeys(keys, NA)
    if inventory is None or inventory.empty or "hook_overhead_pct" not in inventory:
        return out
    values = inventory.loc[inventory["kind"] == "compute", "hook_overhead_pct"].astype(
        float).dropna()
    if values.empty:
        return out
    out["CaptureCpuNumTraces"] = str(len(values))
    out["CaptureCpuHookNegativeTraces"] = str(int((values < 0).sum()))
    out["CaptureCpuHookMinPct"] = number(float(values.min()))
    out["CaptureCpuHookMaxPct"] = number(float(values.max()))
    out["CaptureCpuHookMedianPct"] = number(float(values.median()))
    return out


OVERHEAD_THRESHOLD = 0.03
"""Hook overhead above which a GPU capture's rows are counted as distorted (the tolerance the
capture holds its backward rows to)."""


def gpu_capture_macros(sidecars: dict[str, dict | None]) -> dict[str, str]:
    """The GPU captures' own record of what the per-layer hooks cost (``capture_overhead``
    of each sidecar: the iteration with hooks over the same run's iteration without, minus
    one): the number of traces, the largest overhead and its trace, and the overhead of each
    (``CaptureHookOverhead<Stem>Pct``; stem = trace file name without ``.csv``)."""
    out = {"CaptureOverheadThresholdPct": number(100 * OVERHEAD_THRESHOLD, 0),
           "CaptureNumGpuTraces": NA,
           "CaptureHookOverheadMaxPct": NA,
           "CaptureHookOverheadMaxTrace": NA, "CaptureNumGpuTracesOverThreePct": NA}
    overheads = {stem: float(meta["capture_overhead"]) for stem, meta in sidecars.items()
                 if meta and meta.get("capture_overhead") is not None}
    if not overheads:
        return out
    top = max(sorted(overheads), key=lambda stem: overheads[stem])
    out["CaptureNumGpuTraces"] = str(len(overheads))
    out["CaptureHookOverheadMaxPct"] = number(100.0 * overheads[top])
    out["CaptureHookOverheadMaxTrace"] = latex_escape(top)
    out["CaptureNumGpuTracesOverThreePct"] = str(sum(v > OVERHEAD_THRESHOLD
                                                    for v in overheads.values()))
    for stem, value in overheads.items():
        out[f"CaptureHookOverhead{camel(stem)}Pct"] = number(100.0 * value)
    return out


_GPU_KEYS = ("GpuImportTraces", "GpuImportFwdMinPct", "GpuImportBwdMinPct",
             "GpuImportFwdLinkedMinPct",
             "GpuKernelOverEventMinPct", "GpuKernelOverEventMaxPct", "GpuBusyMin", "GpuBusyMax",
             "GpuBwdSplitTvdMax", "GpuCorrected", "GpuCorrectedHostBound", "GpuRawErrMaxPct",
             "GpuCorrectedErrMaxPct", "GpuSpreadMax")


def gpu_validation_macros(kineto: pd.DataFrame | None, corrections: pd.DataFrame | None
                          ) -> dict[str, str]:
    """Our own H200 measurements: the Kineto import of the hook-free profiler traces
    (data/h200/kineto-import-report.csv, tools/h200_kineto_report.py) and the
    corrected captures (data/h200/correction-report.csv, tools/h200_correct.py)."""
    out = dict.fromkeys(_GPU_KEYS, NA)
    if kineto is not None and len(kineto):
        ratio = pd.concat([kineto["fwd_kernel_over_event"], kineto["bwd_kernel_over_event"]])
        steps = kineto[kineto["trace"].str.startswith("kineto-steps/")]
        out.update({
            "GpuImportTraces": str(len(kineto)),
            "GpuImportFwdMinPct": number(100 * kineto["fwd_attributed"].min(), 1),
            "GpuImportBwdMinPct": number(100 * kineto["bwd_attributed"].min(), 1),
            "GpuImportFwdLinkedMinPct": number(100 * kineto["fwd_linked"].min(), 0),
            "GpuKernelOverEventMinPct": number(100 * ratio.min(), 0),
            "GpuKernelOverEventMaxPct": number(100 * ratio.max(), 0),
            "GpuBusyMin": number(steps["busy_over_unprofiled"].min(), 2),
            "GpuBusyMax": number(steps["busy_over_unprofiled"].max(), 2),
            "GpuBwdSplitTvdMax": number(kineto["bwd_split_tvd_vs_hooks"].max(), 2),
        })
    if corrections is not None and len(corrections):
        raw = corrections[["raw_forward_rel_error", "raw_backward_rel_error"]].abs().to_numpy()
        fixed = corrections[["forward_rel_error", "backward_rel_error"]].abs().to_numpy()
        out.update({
            "GpuCorrected": str(len(corrections)),
            "GpuCorrectedHostBound": str(int(corrections["host_bound"].astype(bool).sum())),
            "GpuRawErrMaxPct": number(100 * raw.max(), 0),
            "GpuCorrectedErrMaxPct": number(100 * fixed.max(), 1),
            "GpuSpreadMax": number(corrections["spread_max_over_min"].max(), 2),
        })
    return out
