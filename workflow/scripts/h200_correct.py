"""Corrected H200 traces: every committed capture (traces/compute/h200) whose forward or
backward rows differ from the hook-free iteration of their run by more than 3 % gets a
``-corrected`` bundle beside it (``gradsched traces correct``; gradsched.capture.correction).

Inputs besides the trace: the spread of hook-free medians in a later process
(data/h200/kineto-steps/kineto-steps-summary.json, 8 and 16 threads; and
data/h200/kineto/kineto-truth-summary.json, 16 threads, for its five models) and the GPU busy
fraction of the hook-free profiled iteration of the same configuration
(data/h200/kineto-import-report.csv, ``busy_over_unprofiled`` of the kineto-steps trace:
kernel-busy time over the unprofiled iteration; written by h200_kineto_report.py).

Also writes data/h200/correction-report.csv (one row per corrected bundle, for the paper's
macros). Run from the repository root: ``python workflow/scripts/h200_correct.py``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from gradsched.cli import main as cli
from gradsched.traces.bundle import ComputeTrace

TRACES = Path("traces/compute/h200")
REPORT = Path("data/h200/kineto-import-report.csv")
SUMMARIES = ("data/h200/kineto-steps/kineto-steps-summary.json",
             "data/h200/kineto/kineto-truth-summary.json")
CORRECTIONS = Path("data/h200/correction-report.csv")
TOLERANCE = 0.03


def main() -> None:
    with REPORT.open() as fh:
        busy = {r["trace"].removeprefix("kineto-steps/"): r["busy_over_unprofiled"]
                for r in csv.DictReader(fh) if r["trace"].startswith("kineto-steps/")}
    for path in sorted(TRACES.glob("*.csv")):
        if path.stem.endswith("-corrected"):
            continue
        meta = ComputeTrace.load(path).meta
        errors = (meta["forward_rows_sum_s"] / meta["forward_nohooks_s"] - 1,
                  meta["backward_rows_sum_s"] / meta["backward_nohooks_s"] - 1)
        if max(abs(e) for e in errors) <= TOLERANCE:
            continue
        args = ["traces", "correct", str(path), "-o",
                str(path.with_name(f"{path.stem}-corrected.csv")),
                *[a for s in SUMMARIES for a in ("--hook-free-summary", s)]]
        if path.stem in busy:
            args += ["--gpu-busy", busy[path.stem], "--gpu-busy-source",
                     f"{REPORT} (busy_over_unprofiled of kineto-steps/{path.stem})"]
        if cli(args) != 0:
            raise SystemExit(f"correcting {path} failed")
    rows = []
    for path in sorted(TRACES.glob("*-corrected.csv")):
        rec = ComputeTrace.load(path).meta["correction"]
        rows.append({"trace": path.stem.removesuffix("-corrected"),
                     "raw_forward_rel_error": rec["raw_forward_rel_error"],
                     "raw_backward_rel_error": rec["raw_backward_rel_error"],
                     "forward_rel_error": rec["forward_rel_error"],
                     "backward_rel_error": rec["backward_rel_error"],
                     "gpu_busy_fraction": rec["gpu_busy_fraction"],
                     "host_bound": rec["host_bound"],
                     "spread_max_over_min": rec["spread"]["max_over_min"]})
    pd.DataFrame(rows).to_csv(CORRECTIONS, index=False, float_format="%.6g")


if __name__ == "__main__":
    main()
