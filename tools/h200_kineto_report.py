"""Import the H200 hook-free profiler traces (data/h200/kineto, kineto-steps) with the
kineto-gpu importer and compare them with the hook capture and the CUDA-event timings.

Writes data/h200/kineto-import-report.csv and .md (one row per trace):
* the share of forward and backward kernel time the importer attributes to a layer
  (sidecar ``forward_attributed_share``, ``forward_linked_share``, ``backward_attributed_share``);
* kernel totals against the hook-free CUDA-event medians of the same process
  (``kineto-truth-summary.json``; ``kineto-steps-summary.json`` at 8 threads): the gap is
  host time the GPU waited for;
* the per-layer split against the hook capture of the same model
  (traces/compute/h200/<stem>.csv), rows matched on ready_order (parameter sizes from the
  profiler's recorded shapes, checked against the capture's): total variation distance
  between the two shares of forward (and of backward) time per layer of the hook capture
  (its ``layer`` column), 0 = same split, 1 = disjoint;
* ``gpu_busy``: the importer's busy share of the profiled step (its GPU period);
  ``busy_over_unprofiled``: the step's kernel-busy time over the unprofiled iteration
  (CUDA-event medians of zero_grad + forward + backward + step): the profiler slows the
  host, so this is the better measure of how much of a real iteration the GPU works.

A maintainer's tool, run by no pipeline rule: the traces and summaries it reads are
committed (data/h200/, traces/compute/h200/) and so is what it wrote (data/h200/README.md).
Run from the repository root::

    PYTHONPATH=src python tools/h200_kineto_report.py          # rewrite the two reports
    PYTHONPATH=src python tools/h200_kineto_report.py --check  # regenerate them elsewhere and
                                                               # compare byte for byte (exit 1
                                                               # when one differs)
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.importers.kineto_gpu import Options, import_kineto_gpu

ROOT = Path("data/h200")
OUTPUTS = ("kineto-import-report.csv", "kineto-import-report.md")
SETS = (("kineto", "gs:iteration", "kineto-truth-summary.json"),
        ("kineto-steps", None, "kineto-steps-summary.json"))


def _medians(entry: dict) -> dict:
    med = entry["cuda_event_medians_s"]
    return med.get("threads8", med)


def _tvd(a: np.ndarray, b: np.ndarray) -> float:
    return float(0.5 * np.abs(a / a.sum() - b / b.sum()).sum())


def _per_layer(a: pd.DataFrame, b: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    """Both traces' time per layer of the hook capture (rows matched on ready_order)."""
    layer = b["layer"].to_numpy()
    return (pd.Series(a[col].to_numpy()).groupby(layer).sum().to_numpy(),
            pd.Series(b[col].to_numpy()).groupby(layer).sum().to_numpy())


def row(folder: str, step_range: str | None, trace: Path, truth: dict) -> dict:
    stem = trace.name.removesuffix(".pt.trace.json.gz")
    hook = ComputeTrace.load(Path("traces/compute/h200") / f"{stem}.csv")
    opts = Options(model=hook.meta["model"], step_range=step_range,
                   batch_size=int(hook.meta["batch_size"]), world_size=1)
    meta = (imported := import_kineto_gpu(trace, opts).compute).meta
    med = _medians(truth[stem])
    fwd_k, bwd_k = meta["forward_total_s"], meta["backward_total_s"]
    # rows matched on ready_order (the same autograd order in both); sizes must agree
    a = imported.frame.set_index("ready_order").sort_index()
    b = hook.frame.set_index("ready_order").sort_index()
    return {
        "trace": f"{folder}/{stem}", "step": meta["step"],
        "forward_method": meta["forward_method"],
        "fwd_kernel_ms": fwd_k * 1e3, "fwd_attributed": meta["forward_attributed_share"],
        "fwd_linked": meta["forward_linked_share"],
        "bwd_kernel_ms": bwd_k * 1e3, "bwd_attributed": meta["backward_attributed_share"],
        "gpu_busy": meta["gpu_busy_share"],
        "busy_over_unprofiled": meta["gpu_busy_s"] / sum(
            med[k] for k in ("zero_grad", "forward", "backward", "step")),
        "fwd_cuda_event_ms": med["forward"] * 1e3, "bwd_cuda_event_ms": med["backward"] * 1e3,
        "fwd_kernel_over_event": fwd_k / med["forward"],
        "bwd_kernel_over_event": bwd_k / med["backward"],
        "fwd_split_tvd_vs_hooks": _tvd(*_per_layer(a, b, "forward_s")),
        "bwd_split_tvd_vs_hooks": _tvd(*_per_layer(a, b, "backward_s")),
        "rows": len(a), "rows_hooks": len(b),
        "sizes_match_by_ready_order": bool(len(a) == len(b) and (a["numel"].to_numpy()
                                                                  == b["numel"].to_numpy()).all()),
    }


def write_reports(out: Path) -> pd.DataFrame:
    """Import every trace and write the CSV and Markdown reports into ``out``."""
    rows = []
    for folder, step_range, summary in SETS:
        truth = json.loads((ROOT / folder / summary).read_text())
        for trace in sorted((ROOT / folder).glob("*.pt.trace.json.gz")):
            rows.append(row(folder, step_range, trace, truth))
    frame = pd.DataFrame(rows)
    frame.to_csv(out / OUTPUTS[0], index=False, float_format="%.4g")
    lines = ["# Kineto GPU import of the H200 hook-free profiler traces",
             "", "Written by `tools/h200_kineto_report.py` (see its docstring "
             "for the columns).", "",
             "| " + " | ".join(frame.columns) + " |",
             "|" + "---|" * len(frame.columns)]
    for rec in frame.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v)
                                       for v in rec) + " |")
    (out / OUTPUTS[1]).write_text("\n".join(lines) + "\n")
    return frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary folder and compare with data/h200")
    args = parser.parse_args(argv)
    if not args.check:
        print(write_reports(ROOT).to_string())
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        write_reports(Path(tmp))
        differ = [name for name in OUTPUTS
                  if not filecmp.cmp(Path(tmp) / name, ROOT / name, shallow=False)]
    for name in differ:
        print(f"h200_kineto_report: {ROOT / name} differs from its regeneration",
              file=sys.stderr)
    print(f"h200_kineto_report: {len(OUTPUTS) - len(differ)} of {len(OUTPUTS)} reports "
          "reproduced byte for byte")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
