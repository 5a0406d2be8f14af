"""The reproduced-vs-published checks (nccl-tests bus bandwidth, B-Caffe merge) and their CLI.

Inputs are small SYNTHETIC traces made here (never committed as measurements)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from gradsched.cli import main
from gradsched.report import compare

NCCL_LOG = """# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor)
#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error
      8      2 float    sum 10.00   0.00   0.00  0e+00 10.00   0.00   0.00  0e+00
1048576 262144 float    sum 100.0  10.49  {bus}  0e+00 100.0  10.49  {bus}  0e+00
# Avg bus bandwidth    : {avg}
"""


def _nccl_trace(path: Path, world: int) -> None:
    pd.DataFrame({"collective": "all_reduce", "backend": "nccl", "world_size": world,
                  "nodes": 1, "in_place": [0, 1, 0, 1], "bytes": [8, 8, 1048576, 1048576],
                  "time_s": [1e-5, 1e-5, 1e-4, 1e-4]}).to_csv(path, index=False)


def test_nccl_busbw_check_within_and_outside(tmp_path: Path) -> None:
    world = 4
    bus = 1048576 / 1e-4 / 1e9 * 2 * (world - 1) / world
    small = 8 / 1e-5 / 1e9 * 2 * (world - 1) / world
    avg = (2 * bus + 2 * small) / 4
    log = tmp_path / "ok.txt"
    log.write_text(NCCL_LOG.format(bus=f"{bus:.2f}", avg=f"{avg:.5f}"))
    trace = tmp_path / "t.csv"
    _nccl_trace(trace, world)
    row = compare.nccl_busbw_row(log, trace)
    assert row["verdict"] == "within" and abs(row["rel_diff_pct"]) < 0.01
    log.write_text(NCCL_LOG.format(bus=f"{bus:.2f}", avg=f"{avg * 1.1:.5f}"))
    assert compare.nccl_busbw_row(log, trace)["verdict"] == "outside"
    log.write_text(NCCL_LOG.format(bus=f"{bus:.2f}", avg="").split("# Avg")[0])
    row = compare.nccl_busbw_row(log, trace)
    assert row["verdict"] == "skipped" and "no 'Avg bus bandwidth'" in row["note"]


def test_bcaffe_merge_check(tmp_path: Path) -> None:
    lines = []
    for dump, merged in ((0, (0, 0, 0, 0)), (1, (30, 0, 40, 0))):
        for pid, m in enumerate(merged):
            lines.append(f"I0219 13:35:4{dump}.031509 69510 distributed.cpp:112] "
                         f"[{pid}, 64, {5 * dump}, 25, {m}]")
    log = tmp_path / "tmp8comm.log"
    log.write_text("\n".join(lines) + "\n")
    result = tmp_path / "r.csv"
    pd.DataFrame({"algorithm": ["wfbp", "mgwfbp"], "comm_busy_s": [1.0, 0.7]}).to_csv(
        result, index=False)
    row = compare.bcaffe_merge_row(log, result, "case")
    assert math.isclose(row["published"], 70 / 100)
    assert math.isclose(row["reproduced"], 0.7) and row["verdict"] == "within"


def test_compare_cli_writes_skipped_rows(tmp_path: Path) -> None:
    out = tmp_path / "c.csv"
    assert main(["report", "compare", "--skip", "nccl-busbw", "x", "no log", "-o",
                 str(out)]) == 0
    frame = pd.read_csv(out)
    assert frame["verdict"].tolist() == ["skipped"]
    assert math.isnan(frame["published"].iloc[0])
