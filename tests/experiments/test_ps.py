"""All-reduce vs parameter servers in the report (report/ps_replay.py).

Synthetic (labelled) trace and alpha-beta models; no measurement."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError
from gradsched.experiments import ps as pr
from gradsched.report.ps_replay import ps_replay_table
from gradsched.traces import ComputeTrace

ALLREDUCE = "alpha-beta:alpha=1e-4,beta=8e-9"  # SYNTHETIC
P2P = "alpha-beta:alpha=5e-5,beta=8e-9"  # SYNTHETIC


def _trace(path: Path, n: int = 6) -> Path:
    """A SYNTHETIC compute trace: n layers of 1 MB each, not measured."""
    frame = pd.DataFrame({
        "name": [f"l{i}.weight" for i in range(n)], "layer": list(range(n)),
        "numel": [250_000] * n, "bytes": [1_000_000] * n,
        "forward_s": [1e-3] * n, "backward_s": [2e-3] * n,
        "ready_order": list(range(n))[::-1], "update_s": [1e-5] * n})
    meta = {"kind": "compute", "model": "synthetic", "batch_size": 1, "device": "none",
            "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
            "iterations": None, "date": "2026-11-24",
            "source": "SYNTHETIC test fixture, not measured"}
    ComputeTrace.from_frame(frame, meta).save(path)
    return path


def test_rows_and_table(tmp_path):
    case = pr.PSCase("syn", _trace(tmp_path / "t.csv"), "net", 4, ALLREDUCE, P2P)
    layouts = [pr.parse_layout("1:separate"), pr.parse_layout("P:colocated")]
    frame = pr.ps_replay([case], layouts, iterations=3)
    archs = list(dict.fromkeys(frame["architecture"]))
    assert archs == ["all-reduce", "PS S=1 separate", "PS S=4 co-located"]
    assert set(frame.loc[frame["architecture"] == "all-reduce", "algorithm"]) == set(
        pr.ALLREDUCE_ALGORITHMS)
    assert set(frame.loc[frame["architecture"] != "all-reduce", "algorithm"]) == set(
        pr.PS_ALGORITHMS)
    assert (frame["iteration_s"] > 0).all()
    # one server takes P x M in and out: slower than all-reduce for synchronous SGD
    sync = frame.set_index(["architecture", "algorithm"])["iteration_s"]
    assert sync[("PS S=1 separate", "bsp-ps")] > sync[("all-reduce", "syncsgd")]
    table, align = ps_replay_table(frame)
    assert len(table) == 3 and len(align) == len(table.columns)
    first = table.iloc[0]
    assert first["best / best all-reduce"] == "1.000"
    ratio = (frame.loc[frame["architecture"] == "PS S=1 separate", "iteration_s"].min()
             / frame.loc[frame["architecture"] == "all-reduce", "iteration_s"].min())
    assert table.iloc[1]["best / best all-reduce"] == f"{ratio:.3f}"


@pytest.mark.parametrize("text,message", [
    ("0", "at least one server"), ("x:colocated", "integer or P"),
    ("2:nearby", "colocated or separate")])
def test_bad_layouts(text, message):
    with pytest.raises(ConfigError, match=message):
        pr.parse_layout(text)


def test_cli_end_to_end_and_bad_world_size(tmp_path, capsys):
    trace = _trace(tmp_path / "t.csv")
    out = tmp_path / "ps.csv"
    assert main(["study", "ps-replay", "--case", "syn", str(trace), "net", "2", ALLREDUCE,
                 P2P, "--layout", "P:separate", "--replay-iters", "3", "-o", str(out)]) == 0
    assert main(["report", "ps-replay-table", "--input", str(out), "--tex",
                 str(tmp_path / "t.tex"), "--md", str(tmp_path / "t.md")]) == 0
    assert "PS S=2 separate" in (tmp_path / "t.md").read_text()
    assert main(["study", "ps-replay", "--case", "syn", str(trace), "net", "one", ALLREDUCE,
                 P2P, "--layout", "1", "-o", str(tmp_path / "x.csv")]) == 2
    assert "P must be an integer" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
