"""benchmarks/bench_executor_host.py runs end to end for one iteration per variant (one
rank, gloo, CPU; plans made by ``gradsched plan`` from the committed trace) and writes its
JSON: every variant timed, ratios to DDP, provenance and load average."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchvision")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_executor_host.py"


@pytest.mark.slow
def test_one_iteration_per_variant_writes_the_json(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    out = tmp_path / "host.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--plans", "ddp,dear,bytescheduler",
                           "--iters", "1", "--warmup", "0", "--rounds", "1", "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert set(data["results"]) == {"ddp-native", "ddp", "dear", "bytescheduler"}
    assert all(len(r) == 1 and len(r[0]) == 1 and r[0][0] > 0
               for r in data["iteration_s"].values())
    assert data["results"]["ddp-native"]["ratio_to_ddp"] == 1.0
    assert data["plans"]["dear"]["update"] == "per_layer"
    assert data["world_size"] == 1 and data["machine"]["logical_cpus"]
    assert len(data["load_average_before"]) == 3
