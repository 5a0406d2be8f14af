"""An inventory of trace bundles: one row per trace with the facts a reader checks first
(what was measured, how, and the capture's own quality checks)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.traces.bundle import CommTrace, ComputeTrace, meta_path

INVENTORY_COLUMNS = (
    "kind", "trace", "model", "batch_size", "device", "world_size", "n_rows", "bytes",
    "iteration_s", "iteration_nohooks_s", "hook_overhead_pct", "backward_rows_sum_s",
    "backward_measured_s", "collectives", "max_bytes", "peak_busbw_Bps", "hardware",
    "load_avg_1min",
)


def _load_avg(meta: dict[str, Any]) -> float:
    for key in ("load_average_before", "load_average"):
        value = meta.get(key)
        if isinstance(value, list) and value:
            return float(value[0])
        if isinstance(value, dict):
            numbers = [v[0] if isinstance(v, list) else v for v in value.values()]
            numbers = [float(v) for v in numbers if isinstance(v, int | float)]
            if numbers:
                return float(np.mean(numbers))
    return float("nan")


def _compute_row(path: Path) -> dict[str, Any]:
    trace = ComputeTrace.load(path)
    meta = trace.meta
    with_hooks, without = meta.get("iteration_s"), meta.get("iteration_nohooks_s")
    overhead = (100.0 * (with_hooks / without - 1.0)
                if with_hooks and without else float("nan"))
    return {
        "kind": "compute", "trace": path.stem, "model": meta["model"],
        "batch_size": meta["batch_size"], "device": meta["device"],
        "world_size": meta["world_size"], "n_rows": trace.n_tensors,
        "bytes": trace.total_bytes, "iteration_s": with_hooks,
        "iteration_nohooks_s": without, "hook_overhead_pct": overhead,
        "backward_rows_sum_s": trace.backward_total_s,
        "backward_measured_s": meta.get("backward_measured_s"),
        "load_avg_1min": _load_avg(meta),
    }


def _comm_row(path: Path) -> dict[str, Any]:
    trace = CommTrace.load(path)
    frame, meta = trace.frame, trace.meta
    busbw = frame["busbw_Bps"].max() if "busbw_Bps" in frame.columns else float("nan")
    return {
        "kind": "comm", "trace": path.stem, "device": frame["backend"].iloc[0],
        "world_size": int(frame["world_size"].max()), "n_rows": len(frame),
        "collectives": ";".join(sorted(frame["collective"].unique())),
        "max_bytes": int(frame["bytes"].max()), "peak_busbw_Bps": busbw,
        "hardware": meta["hardware"], "load_avg_1min": _load_avg(meta),
    }


def inventory(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per trace (kind read from its sidecar), sorted by kind then name."""
    rows = []
    for path in map(Path, paths):
        if not path.is_file():  # a folder or a typo: name it, not "<name>.meta.json"
            raise InputError("file not found", path=path)
        kind = read_json(meta_path(path), missing="metadata sidecar is missing").get("kind")
        rows.append(_compute_row(path) if kind == "compute" else _comm_row(path))
    frame = pd.DataFrame(rows, columns=list(INVENTORY_COLUMNS))
    return frame.sort_values(["kind", "trace"], kind="stable").reset_index(drop=True)
