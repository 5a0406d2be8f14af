"""``gradsched shard``: compare, plan (with the fully_shard lines to paste) and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
COMM = REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv"


def gs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradsched", *args], capture_output=True,
                          text=True, timeout=300, cwd=REPO)


def test_compare_writes_a_row_per_planner_and_their_plans(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    proc = gs("shard", "compare", "--compute", str(TRACE), "--comm", str(COMM),
              "--world-size", "2", "--semantics", "blocking", "--plans-dir",
              str(tmp_path / "plans"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    header = out.read_text().splitlines()[0]
    assert "iteration_s" in header and "gathered_peak_bytes" in header
    assert sorted(p.name for p in (tmp_path / "plans").iterdir()) == [
        "fsdp2-cap.json", "fsdp2-noreshard.json", "fsdp2-saturation.json", "fsdp2.json",
        "sharded-optimum.json", "torchtitan-2024.json", "torchtitan.json",
        "zero3.json"]


def test_plan_prints_the_fully_shard_layout(tmp_path: Path) -> None:
    proc = gs("shard", "plan", "--compute", str(TRACE), "--comm", str(COMM), "--world-size",
              "2", "--algorithm", "fsdp2", "-o", str(tmp_path / "p.json"))
    assert proc.returncode == 0, proc.stderr
    assert "fully_shard(u0, reshard_after_forward=True)" in proc.stdout
    assert "model.get_submodule('layer1.0')" in proc.stdout
    assert json.loads((tmp_path / "p.json").read_text())["format"] == "gradsched.sharded_plan"


def test_an_impossible_memory_cap_is_one_clear_line(tmp_path: Path) -> None:
    proc = gs("shard", "plan", "--compute", str(TRACE), "--comm", str(COMM), "--world-size",
              "2", "--algorithm", "sharded-optimum", "--memory-cap", "1M",
              "-o", str(tmp_path / "p.json"))
    assert proc.returncode != 0
    assert "no sharded plan fits the memory cap" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "p.json").exists()


def test_an_unknown_planner_or_knob_is_refused(tmp_path: Path) -> None:
    for extra, message in ((["--algorithm", "zero9"], "unknown sharded planner"),
                           (["--algorithm", "fsdp2", "--knob", "unit_mb=3"], "has no knob")):
        proc = gs("shard", "plan", "--compute", str(TRACE), "--comm", str(COMM),
                  "--world-size", "2", *extra, "-o", str(tmp_path / "p.json"))
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
