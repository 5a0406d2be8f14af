"""The forward-time table: an added forward moves the ranking (DeAR hides all-gathers under it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.cli import main
from gradsched.report.forward import forward_table
from tests.traces.test_forward import BCAFFE, BCAFFE_COMM


def test_forward_moves_the_ranking(tmp_path: Path) -> None:
    runs = []
    for ratio in ("0", "0.5"):
        out = tmp_path / f"r{ratio}.csv"
        assert main(["replay", "--compute", str(BCAFFE), "--comm", str(BCAFFE_COMM),
                     "--algorithms", "wfbp,mgwfbp,dear", "--forward-ratio", ratio,
                     "-o", str(out)]) == 0
        runs.append((float(ratio), out))
    zero, half = (pd.read_csv(p).set_index("algorithm")["iteration_s"] for _, p in runs)
    # every plan pays the added forward, DeAR's all-gathers hide under part of it
    assert (half > zero).all()
    assert half["dear"] - zero["dear"] < half["wfbp"] - zero["wfbp"]
    long = pd.concat([pd.read_csv(p).assign(forward_ratio=r) for r, p in runs])
    table = forward_table(long)
    assert list(table.columns)[1:] == ["fwd 0x bwd: ms (rank)", "fwd 0.5x bwd: ms (rank)"]
