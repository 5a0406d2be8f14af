"""One host-bound definition (gradsched.traces.host_bound, the kineto-gpu importer's): the
importer's traces, the H200 hook captures and their corrected bundles all carry its verdict,
and the corrected bundles agree with it (committed traces; one SYNTHETIC sidecar)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.host_bound import CPU_BOUND_SHARE, is_host_bound, judgement, record
from gradsched.traces.importers.kineto_gpu.options import Options
from tests.conftest import REPO


def test_the_rule_is_the_importers() -> None:
    assert Options().cpu_bound_share == CPU_BOUND_SHARE == 0.8
    assert is_host_bound(0.79) and not is_host_bound(0.8) and not is_host_bound(0.893)
    # SYNTHETIC sidecars: the importer's verdict first, then a capture's record, else None
    assert judgement({"cpu_bound": True}) is True
    assert judgement({"host_bound": record(0.97, "x")}) is False
    assert judgement({"correction": {"host_bound": True}}) is None  # not a second rule
    assert judgement({"device": "cpu"}) is None


@pytest.mark.parametrize("folder", ["h200", "h200-kineto", "kineto-gpu"])
def test_every_gpu_trace_with_a_timeline_is_judged(folder: str) -> None:
    paths = sorted((REPO / "traces" / "compute" / folder).glob("*.csv"))
    assert paths
    for path in paths:
        trace = ComputeTrace.load(path)
        assert trace.host_bound is not None, path
        if folder == "h200":  # a capture: the verdict on its importer sibling's share
            stem = path.stem.removesuffix("-corrected")
            sibling = json.loads((REPO / "traces/compute/h200-kineto"
                                  / f"{stem}.meta.json").read_text())
            assert trace.host_bound == sibling["cpu_bound"], path
            corr = trace.meta.get("correction")
            if corr is not None:  # the correction's record says the same
                assert corr["host_bound"] == trace.host_bound, path


def test_gpt2_bf16_is_not_host_bound_by_the_one_definition() -> None:
    """The replay's GPT-2 bf16 (config.yaml) was host-bound by a second rule (busy over the
    unprofiled iteration 0.893 < 0.9) while the host-check table shows the importer's 0.97."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    trace = ComputeTrace.load(REPO / config["compute"]["gpt2-h200-bf16"])
    assert trace.host_bound is False
    assert trace.meta["host_bound"]["gpu_busy_share"] > 0.95


def test_the_stamping_tool_reproduces() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "h200_host_bound.py"),
                           "--check"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "18 of 18 captures" in proc.stdout
