"""benchmarks/gpu/gpu_check.py: without a GPU it stops at once with a clear message and exit 2,
and writes nothing; its kernel-time union is right on a small synthetic Chrome trace."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_exits_2_with_a_message_and_writes_nothing(tmp_path: Path) -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--budget-s", "10"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "gpu_check: cannot run:" in proc.stderr
    assert "needs one CUDA GPU" in proc.stderr and "nothing was run or written" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_kernel_busy_time_is_the_union_of_kernel_intervals() -> None:
    chrome = {"traceEvents": [
        {"cat": "kernel", "ts": 0.0, "dur": 1000.0},
        {"cat": "kernel", "ts": 500.0, "dur": 1000.0},   # overlaps the first
        {"cat": "kernel", "ts": 3000.0, "dur": 500.0},
        {"cat": "cpu_op", "ts": 0.0, "dur": 9000.0},     # not a kernel
    ]}
    assert _module().kernel_busy_ms(chrome) == 2.0


def test_stems_are_the_committed_h200_trace_names() -> None:
    module = _module()
    stems = {module.stem(m, b, s, d) for m, b, s, d in module.ALL_CONFIGS}
    committed = {p.stem for p in (REPO / "traces/compute/h200").glob("*-cuda-*.csv")
                 if not p.stem.endswith("-corrected")}
    assert stems == committed and len(stems) == 18
    assert {(m, b, d) for m, b, _, d in module.ALL_CONFIGS} >= module.QUICK
