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


def test_one_archive_with_manifest_and_budget_cuts(tmp_path: Path, monkeypatch) -> None:
    """The orchestration without a GPU: every step faked (rc 0, no time), then one archive
    whose manifest lists every step; a budget too small for the rest marks it skipped."""
    import json
    import tarfile

    module = _module()
    monkeypatch.setattr(module, "gpu_problem", lambda: None)
    monkeypatch.setattr(module, "machine_text", lambda: "nvidia-smi: (faked in the test)\n")
    calls: list[list[str]] = []

    def fake_run(cmd, log, timeout, env):
        calls.append(cmd)
        log.write_text("faked\n")
        return 0, 0.0

    monkeypatch.setattr(module, "_run", fake_run)
    assert module.main(["--out", str(tmp_path), "--budget-s", "300"]) == 0
    archives = list(tmp_path.glob("gpu-check-*.tar.gz"))
    assert len(archives) == 1 and not list(tmp_path.glob("*.part"))
    with tarfile.open(archives[0]) as tar:
        names = tar.getnames()
        root = names[0].split("/")[0]
        manifest = json.loads(tar.extractfile(f"{root}/manifest.json").read())
        assert f"{root}/machine.txt" in names
    kinds = [s["step"] for s in manifest["steps"]]
    assert kinds.count("capture") == kinds.count("truth") == len(module.QUICK)
    assert kinds[-4:] == ["plan", "plan", "plan", "run"] and manifest["n_not_ok"] == 0
    run = calls[-1]
    assert run[run.index("--backend") + 1] == "nccl" and run.count("--plan") == 3
    # a budget that leaves nothing after the reserve: captures are skipped, exit status 1
    calls.clear()
    assert module.main(["--out", str(tmp_path / "small"), "--budget-s", "60"]) == 1
    with tarfile.open(next((tmp_path / "small").glob("*.tar.gz"))) as tar:
        root = tar.getnames()[0].split("/")[0]
        small = json.loads(tar.extractfile(f"{root}/manifest.json").read())
    assert {s["status"] for s in small["steps"] if s["step"] == "capture"} == {"skipped"}
