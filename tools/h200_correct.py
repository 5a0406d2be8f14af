"""Corrected H200 traces: every committed capture (traces/compute/h200) whose forward or
backward rows differ from the hook-free iteration of their run by more than 3 % gets a
``-corrected`` bundle beside it (``gradsched traces correct``; gradsched.capture.correction).

Inputs besides the trace: the spread of hook-free medians in a later process
(data/h200/kineto-steps/kineto-steps-summary.json, 8 and 16 threads; and
data/h200/kineto/kineto-truth-summary.json, 16 threads, for its five models) and the GPU busy
fraction of the hook-free profiled iteration of the same configuration: the kineto-gpu
importer's ``gpu_busy_share`` (traces/compute/h200-kineto/<stem>.meta.json), the busy measure
of the project's one host-bound definition (gradsched.traces.host_bound; the same share the
capture's own ``host_bound`` record holds, tools/h200_host_bound.py).

Also writes data/h200/correction-report.csv (one row per corrected bundle, for the paper's
macros). A maintainer's tool, run by no pipeline rule: its inputs and what it wrote are
committed. Run from the repository root::

    PYTHONPATH=src python tools/h200_correct.py          # rewrite the corrected bundles
    PYTHONPATH=src python tools/h200_correct.py --check  # regenerate them elsewhere and
                                                         # compare byte for byte (exit 1
                                                         # when one differs)
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import io
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

from gradsched.cli import main as cli
from gradsched.traces.bundle import ComputeTrace

TRACES = Path("traces/compute/h200")
IMPORTED = Path("traces/compute/h200-kineto")
SUMMARIES = ("data/h200/kineto-steps/kineto-steps-summary.json",
             "data/h200/kineto/kineto-truth-summary.json")
CORRECTIONS = Path("data/h200/correction-report.csv")
TOLERANCE = 0.03


def correct(out: Path) -> list[Path]:
    """Correct every capture above ``TOLERANCE`` into ``out`` (same file names); returns the
    corrected CSVs."""
    busy = {p.name.removesuffix(".meta.json"): repr(json.loads(p.read_text())["gpu_busy_share"])
            for p in sorted(IMPORTED.glob("*.meta.json"))}
    written = []
    for path in sorted(TRACES.glob("*.csv")):
        if path.stem.endswith("-corrected"):
            continue
        meta = ComputeTrace.load(path).meta
        errors = (meta["forward_rows_sum_s"] / meta["forward_nohooks_s"] - 1,
                  meta["backward_rows_sum_s"] / meta["backward_nohooks_s"] - 1)
        if max(abs(e) for e in errors) <= TOLERANCE:
            continue
        target = out / f"{path.stem}-corrected.csv"
        args = ["traces", "correct", str(path), "-o", str(target),
                *[a for s in SUMMARIES for a in ("--hook-free-summary", s)]]
        if path.stem in busy:
            args += ["--gpu-busy", busy[path.stem], "--gpu-busy-source",
                     f"{IMPORTED}/{path.stem}.meta.json (gpu_busy_share)"]
        if cli(args) != 0:
            raise SystemExit(f"correcting {path} failed")
        written.append(target)
    return written


def correction_report(corrected: list[Path], out: Path) -> None:
    """One row per corrected bundle (for the paper's macros) into ``out``."""
    rows = []
    for path in sorted(corrected):
        rec = ComputeTrace.load(path).meta["correction"]
        rows.append({"trace": path.stem.removesuffix("-corrected"),
                     "raw_forward_rel_error": rec["raw_forward_rel_error"],
                     "raw_backward_rel_error": rec["raw_backward_rel_error"],
                     "forward_rel_error": rec["forward_rel_error"],
                     "backward_rel_error": rec["backward_rel_error"],
                     "gpu_busy_fraction": rec["gpu_busy_fraction"],
                     "host_bound": rec["host_bound"],
                     "spread_max_over_min": rec["spread"]["max_over_min"]})
    pd.DataFrame(rows).to_csv(out, index=False, float_format="%.6g")


def check() -> int:
    """Regenerate into a temporary folder; 1 when a committed file differs or is missing."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        written = correct(Path(tmp))
        correction_report(written, Path(tmp) / CORRECTIONS.name)
        pairs = [(p, TRACES / p.name) for p in written]
        pairs += [(p.with_suffix(".meta.json"), TRACES / p.with_suffix(".meta.json").name)
                  for p in written]
        pairs.append((Path(tmp) / CORRECTIONS.name, CORRECTIONS))
        committed = set(TRACES.glob("*-corrected.csv"))
        differ = [str(mine) for new, mine in pairs
                  if not mine.is_file() or not filecmp.cmp(new, mine, shallow=False)]
        differ += [str(p) for p in sorted(committed - {mine for _, mine in pairs})]
    for path in differ:
        print(f"h200_correct: {path} differs from its regeneration (or has none)",
              file=sys.stderr)
    print(f"h200_correct: {len(pairs) - len(differ)} of {len(pairs)} files reproduced byte "
          "for byte")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary folder and compare")
    if parser.parse_args(argv).check:
        return check()
    correction_report(correct(TRACES), CORRECTIONS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
