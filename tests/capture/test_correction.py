"""The correction of a hooked GPU capture on a synthetic, labelled host-bound case."""

from __future__ import annotations

import pandas as pd
import pytest

from gradsched.capture.correction import CorrectionInputs, HookFree, correct
from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace


def _trace(fwd: list[float], bwd: list[float], **meta: object) -> ComputeTrace:
    n = len(fwd)
    frame = pd.DataFrame({"name": [f"l{i}.weight" for i in range(n)], "layer": range(n),
                          "numel": [10] * n, "bytes": [40] * n, "forward_s": fwd,
                          "backward_s": bwd, "ready_order": list(range(n))[::-1]})
    base = {"kind": "compute", "model": "synthetic-host-bound", "batch_size": 1,
            "device": "cuda (synthetic)", "dtype": "fp32", "world_size": 1, "software": {},
            "capture_method": "synthetic", "iterations": 1, "date": "2026-11-26",
            "source": "synthetic: hooks add 1 ms of host time per layer"}
    return ComputeTrace.from_frame(frame, {**base, **meta})


def test_host_bound_capture_is_rescaled_to_the_hook_free_iteration() -> None:
    # Labelled case: true kernel time 1 ms fwd / 2 ms bwd per layer; each hook adds 1 ms of
    # host time that the GPU waits for, so the hooked rows read 2 ms / 3 ms.
    true_f, true_b = [1e-3] * 4, [2e-3] * 4
    raw = _trace([2e-3] * 4, [3e-3] * 4, forward_nohooks_s=sum(true_f),
                 backward_nohooks_s=sum(true_b), capture_overhead=0.6)
    other = HookFree("second process", 4.4e-3, 8.8e-3)
    fixed, rec = correct(raw, CorrectionInputs(samples=[other], gpu_busy=0.5))
    assert fixed.frame["forward_s"].tolist() == pytest.approx(true_f)
    assert fixed.frame["backward_s"].tolist() == pytest.approx(true_b)
    assert rec["raw_forward_rel_error"] == pytest.approx(1.0)
    assert rec["raw_backward_rel_error"] == pytest.approx(0.5)
    assert abs(rec["forward_rel_error"]) < 1e-9 and rec["within_tolerance"]
    assert rec["host_bound"] and rec["host_bound_rule"].startswith("kineto-gpu importer")
    assert rec["spread"]["max_over_min"] == pytest.approx(1.1)
    assert fixed.meta["correction"]["method"] == "rescale-to-hook-free"
    assert fixed.frame["ready_order"].tolist() == raw.frame["ready_order"].tolist()


def test_one_host_bound_rule_and_bad_inputs() -> None:
    """The importer's rule (busy share < 0.8) on the share given; no share: not judged,
    whatever the hook overhead (the overhead rule is gone: one definition)."""
    raw = _trace([1e-3], [1e-3], forward_nohooks_s=1e-3, backward_nohooks_s=1e-3,
                 capture_overhead=0.6)
    _, rec = correct(raw)
    assert rec["host_bound"] is None and rec["host_bound_rule"].startswith("not judged")
    _, busy = correct(raw, CorrectionInputs(gpu_busy=0.89))  # host-bound by the old 0.9
    assert busy["host_bound"] is False
    _, idle = correct(raw, CorrectionInputs(gpu_busy=0.79))
    assert idle["host_bound"] is True
    with pytest.raises(InputError, match="not in"):
        correct(raw, CorrectionInputs(gpu_busy=3.77))
    with pytest.raises(InputError, match="forward_nohooks_s"):
        correct(_trace([1e-3], [1e-3]))


def test_cli_corrects_a_committed_h200_capture(tmp_path, capsys) -> None:
    """`gradsched traces correct` on the H200 bert-large bf16 capture (hooks +38 %)."""
    from pathlib import Path

    from gradsched.cli import main

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "c.csv"
    rc = main(["traces", "correct", str(repo / "traces/compute/h200/"
                                        "bert-large-s128-b16-cuda-bf16.csv"), "-o", str(out),
               "--hook-free-summary",
               str(repo / "data/h200/kineto-steps/kineto-steps-summary.json"),
               "--gpu-busy", "0.32"])
    assert rc == 0, capsys.readouterr().err
    rec = ComputeTrace.load(out).meta["correction"]
    assert rec["host_bound"] and rec["within_tolerance"]
    assert rec["raw_backward_rel_error"] > 0.3
    assert rec["spread"]["max_over_min"] == pytest.approx(1.55, abs=0.01)
    assert len(rec["spread"]["samples"]) == 3
