"""Predicting the re-execution: each measured case's plans replayed on its compute trace,
scaled by the compute-only control of the same launch, with and without the calibrated
interference (step 3 of the method in :mod:`gradsched.reexec`), next to what was measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.costmodel.base import load_comm_spec
from gradsched.errors import ConfigError, InputError
from gradsched.intermediates import ITERATIONS, read_intermediate
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.plan import Plan
from gradsched.reexec.config import (
    ZERO1_MODES,
    InterferenceSpec,
    interference_for,
    load_interference,
    parse_settings,
)
from gradsched.reexec.meta import META, case_meta
from gradsched.reexec.run import CONTROL, FOREIGN_LIMIT_CORES
from gradsched.replay.bounds import lower_bound
from gradsched.replay.engine import ReplayOptions, replay
from gradsched.traces.bundle import ComputeTrace

MEASURED_COLUMNS = (
    "case", "model", "batch_size", "world_size", "bandwidth", "algorithm", "kind", "item",
    "n_buckets", "n_collectives", "update", "predicted_raw_s", "compute_scale",
    "predicted_s", "predicted_interference_s", "predicted_dynamic_s", "compute_slowdown",
    "comm_slowdown", "collective_cpu_s",
    "measured_s", "measured_p10_s", "measured_p90_s", "measured_mean_s", "iters", "rounds",
    "load_avg", "load_avg_min", "load_avg_max", "foreign_cpu_cores_max", "n_flagged_runs",
    "bound_s", "ddp_buckets_match",
)


def scaled_trace(trace: Any, scale: float) -> Any:
    """``trace`` with every compute time (forward, backward, update, their p10/p90)
    multiplied by ``scale``."""
    if scale <= 0:
        raise ConfigError(f"compute scale must be > 0, got {scale}")
    frame = trace.frame.copy()
    for col in frame.columns:
        if col.endswith("_s") and col.split("_")[0] in ("forward", "backward", "update"):
            frame[col] = frame[col] * scale
    out = ComputeTrace.from_frame(frame, trace.meta)
    out.path = trace.path
    return out


def trace_compute_s(trace: Any, grad_accum: int = 1) -> float:
    """Sum of the trace's forward, backward and update times (the replay's compute), per
    optimizer step of ``grad_accum`` micro-batches: forward and backward ``grad_accum``
    times, the update once (:mod:`gradsched.replay.engine`)."""
    if grad_accum == 1:
        return float(trace.forward_total_s + trace.backward_total_s + trace.update_total_s)
    return float((trace.forward_total_s + trace.backward_total_s) * grad_accum
                 + trace.update_total_s)


def _foreign_stats(times: pd.DataFrame) -> dict[str, float | int]:
    """The most foreign CPU seen during an item's runs, and how many of its runs were at
    or above the limit (data from before the column existed: NaN and 0)."""
    if "foreign_cpu_cores" not in times:
        return {"foreign_cpu_cores_max": math.nan, "n_flagged_runs": 0}
    per_run = times.groupby("round")["foreign_cpu_cores"].first()
    return {"foreign_cpu_cores_max": float(per_run.max()),
            "n_flagged_runs": int((per_run >= FOREIGN_LIMIT_CORES).sum())}


def _stats(values: list[float]) -> dict[str, float]:
    from gradsched.runtime.bench import percentile  # the runtime imports torch

    return {"measured_s": statistics.median(values), "measured_p10_s": percentile(values, 10),
            "measured_p90_s": percentile(values, 90),
            "measured_mean_s": statistics.fmean(values)}


def row_kind(label: str) -> str:
    """``ddp-native`` (stock DDP, one cap), ``ddp-list`` (stock DDP, a planner's buckets as
    ``bucket_cap_mb_list``), ``zero1`` (stock DDP with ``ZeroRedundancyOptimizer``) or
    ``plan`` (gradsched's executor)."""
    for kind in ("ddp-native", "ddp-list"):
        if label.startswith(f"{kind}-"):
            return kind
    return "zero1" if label in ZERO1_MODES.values() else "plan"


def rebuilt_match(meta: dict[str, Any], label: str) -> bool | None:
    """For a ``ddp-list`` row: whether stock DDP rebuilt the plan's buckets on every rank
    in every round (``meta.json``'s ``ddp_rebuilt_buckets``); None for other rows."""
    record = (meta.get("ddp_rebuilt_buckets") or {}).get(label)
    return None if record is None else bool(record["buckets_match_plan"])


def collect_case(folder: str | Path, interference: InterferenceSpec = None) -> pd.DataFrame:
    """One row per algorithm (and DDP cap, and the control) of a measured case folder."""
    folder = Path(folder)
    meta_file = folder / META
    meta, case = case_meta(folder)  # the input gate, then every field used below
    k = case.grad_accum
    settings = parse_settings(meta["settings"], meta_file)
    frame = read_intermediate(folder / "iterations.csv", (ITERATIONS,))
    control = frame.loc[frame["item"] == CONTROL, "iteration_s"].tolist()
    if not control:
        raise InputError("no compute-only control iterations", path=folder / "iterations.csv")
    trace = ComputeTrace.load(case.compute)
    model = load_comm_spec(case.comm)
    scale = statistics.median(control) / trace_compute_s(trace, k)
    scaled = scaled_trace(trace, scale)
    inter_path = interference_for(interference, case.network, case.world_size)
    params, _ = load_interference(inter_path)
    plain = ReplayOptions(iterations=settings.replay_iterations, issue="executor",
                          grad_accum=k)
    inter = ReplayOptions(iterations=settings.replay_iterations, issue="executor",
                          grad_accum=k, **params)
    dynamic = ReplayOptions(iterations=settings.replay_iterations, issue="dynamic",
                            grad_accum=k, **params)
    # the lower bound of any plan on the scaled trace (replay/bounds.py; no interference):
    # how much faster than a baseline any schedule could be under the model
    bound = lower_bound(scaled, model, case.world_size, k).lower_bound_s
    rows = []
    base = {"case": case.name, "model": case.model, "batch_size": case.batch_size,
            "world_size": case.world_size, "bandwidth": case.network}
    for label, item in meta["item_of"].items():
        plan = Plan.load(folder / "plans" / f"{label}.plan.json")
        times = frame.loc[frame["item"] == item]
        if times.empty:
            raise InputError(f"no measured iterations for item {item!r}",
                             path=folder / "iterations.csv")
        raw = replay(trace, plan, model, case.world_size, plain)
        rows.append(base | {
            "algorithm": label, "kind": row_kind(label), "item": item,
            "n_buckets": raw.n_buckets,
            "n_collectives": raw.n_collectives, "update": plan.update,
            "predicted_raw_s": raw.iteration_s, "compute_scale": scale,
            "predicted_s": replay(scaled, plan, model, case.world_size, plain).iteration_s,
            "predicted_interference_s": replay(scaled, plan, model, case.world_size,
                                               inter).iteration_s,
            "predicted_dynamic_s": replay(scaled, plan, model, case.world_size,
                                          dynamic).iteration_s,
            **params, **_stats(times["iteration_s"].tolist()), "iters": len(times),
            "rounds": int(times["round"].nunique()),
            "load_avg": float(times.groupby("round")["load_avg_1m"].first().mean()),
            "load_avg_min": float(times["load_avg_1m"].min()),
            "load_avg_max": float(times["load_avg_1m"].max()), **_foreign_stats(times),
            "bound_s": bound, "ddp_buckets_match": rebuilt_match(meta, label)})
    ctrl = frame.loc[frame["item"] == CONTROL]
    rows.append(base | {
        "algorithm": CONTROL, "kind": "control", "item": CONTROL, "n_buckets": 0,
        "n_collectives": 0, "update": "global",
        "predicted_raw_s": trace_compute_s(trace, k),
        "compute_scale": scale, "predicted_s": trace_compute_s(scaled, k),
        "predicted_interference_s": trace_compute_s(scaled, k),
        "predicted_dynamic_s": trace_compute_s(scaled, k), **params,
        **_stats(ctrl["iteration_s"].tolist()), "iters": len(ctrl),
        "rounds": int(ctrl["round"].nunique()),
        "load_avg": float(ctrl.groupby("round")["load_avg_1m"].first().mean()),
        "load_avg_min": float(ctrl["load_avg_1m"].min()),
        "load_avg_max": float(ctrl["load_avg_1m"].max()), **_foreign_stats(ctrl),
        "bound_s": bound})
    return pd.DataFrame(rows, columns=list(MEASURED_COLUMNS)).assign(grad_accum=k)


def collect(folders: Sequence[str | Path], interference: InterferenceSpec,
            output: str | Path, iterations_output: str | Path | None = None,
            settings_output: str | Path | None = None) -> pd.DataFrame:
    """Predictions + measurements of every case folder -> ``output`` (measured.csv); also
    the concatenated per-iteration rows and a provenance JSON when asked."""
    if not folders:
        raise ConfigError("no case folders given")
    frames = [collect_case(f, interference) for f in folders]
    table = pd.concat(frames, ignore_index=True)
    accumulating = bool((table["grad_accum"] != 1).any())
    if not accumulating:  # data without accumulation: the columns of before
        table = table.drop(columns="grad_accum")
    write_csv_atomic(output, table)
    if iterations_output is not None:
        its = pd.concat([read_intermediate(Path(f) / "iterations.csv", (ITERATIONS,))
                         for f in folders],
                        ignore_index=True)
        write_csv_atomic(iterations_output, its)
    if settings_output is not None:
        metas = {}
        for f in folders:
            meta, case = case_meta(f)
            metas[case.name] = meta
        inter = {}
        for net, world in sorted({(m["case"]["network"], m["case"]["world_size"])
                                  for m in metas.values()}):
            path = interference_for(interference, net, world)
            if path is not None:
                data = load_interference(path)[1]
                inter[f"{net}-p{world}"] = {"file": str(path)} | {
                    k: v for k, v in data.items() if k != "raw"}
        write_json_atomic(settings_output, {
            "kind": "reexec-provenance",
            "description": "Re-execution of every planner's plan with gradsched's executor "
                           "(and PyTorch DDP itself) vs the replay's prediction; see "
                           "gradsched.reexec for the method",
            "columns": {
                "predicted_raw_s": "replay of the committed compute trace as it is (CPU "
                                   "thread time of one uncontended rank)",
                "compute_scale": "median compute-only control (same launch, no "
                                 "communication) / the trace's compute sum",
                "predicted_s": "replay on the trace scaled by compute_scale, with the "
                               "executor's fixed issue order",
                "predicted_interference_s": "the same with the interference of "
                                            "interference.json: collective_cpu_s, "
                                            "compute_slowdown, comm_slowdown",
                "predicted_dynamic_s": "with interference, but the algorithms' dynamic "
                                       "issue order (what a scheduler free to reorder "
                                       "collectives would do)",
                "ddp_buckets_match": "ddp-list rows (stock PyTorch DDP with a planner's "
                                     "buckets as bucket_cap_mb_list): whether DDP rebuilt "
                                     "exactly the plan's buckets on every rank and round",
                "measured_s": "median iteration over all rounds (period between starts "
                              "of iterations, max over ranks)",
                **({"grad_accum": "micro-batches per optimizer step: every time of the "
                                  "row (measured, predicted, control) is one step of "
                                  "grad_accum micro-batches"} if accumulating else {}),
                "load_avg": "mean over rounds of the 1-minute load average read before the "
                            "item ran; load_avg_min/max over its runs"},
            "interference": inter, "cases": metas})
    return table
