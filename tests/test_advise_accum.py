"""``gradsched advise --validate --grad-accum K``: every item (stock DDP at the caps, the
plan through the executor) timed per optimizer step of K micro-batches on 2 gloo ranks
(the tiny MLP, a compute trace captured here, the committed loopback sweep), beside the
replay's prediction of that step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.cli import main

REPO = Path(__file__).resolve().parents[1]
LOOP2 = REPO / "traces/comm/cpu/gloo-loopback-p2.csv"


def _validate(trace: Path, out: Path, k: int) -> None:
    assert main(["advise", "--compute", str(trace), "--comm", str(LOOP2), "--world-size", "2",
                 "--grad-accum", str(k), "--json", str(out), "--validate", "--rounds", "1",
                 "--iters", "2", "--warmup", "1", "--timeout-s", "60"]) == 0


@pytest.mark.slow
def test_validate_times_steps_of_k_micro_batches(tiny_mlp_trace: Path, tmp_path: Path,
                                                 capsys) -> None:
    out = tmp_path / "advice.json"
    _validate(tiny_mlp_trace, out, 2)
    text = capsys.readouterr().out
    advice = json.loads(out.read_text())
    val = advice["validation"]
    assert val["grad_accum"] == 2
    assert "time per optimizer step of 2 micro-batches" in text
    times = val["iteration_s"]
    assert times and all(len(v) == 2 and min(v) > 0 for v in times.values())
    # every item's every step ran 2 micro-batches (1 if --grad-accum were dropped on the
    # way to the ranks or by a runner)
    assert val["micro_batches_per_step"] == dict.fromkeys(times, 2.0)
    # beside each measured step: the replay's prediction of a step of 2 micro-batches
    assert set(val["predicted_s"]) == set(times)
    assert val["predicted_s"]["current"] == pytest.approx(
        advice["ddp"]["current"]["iteration_s"])
    assert "predicted" in text


@pytest.mark.slow
def test_without_accumulation_one_micro_batch_per_step(tiny_mlp_trace: Path, tmp_path: Path,
                                                       capsys) -> None:
    out = tmp_path / "advice.json"
    _validate(tiny_mlp_trace, out, 1)
    val = json.loads(out.read_text())["validation"]
    assert val["grad_accum"] == 1
    assert val["micro_batches_per_step"] == dict.fromkeys(val["iteration_s"], 1.0)
    assert "time per iteration" in capsys.readouterr().out


@pytest.mark.slow
def test_sharded_validate_times_steps_of_k_micro_batches(tiny_mlp_trace: Path, tmp_path: Path,
                                                        capsys) -> None:
    """Stock FSDP2 runs 2 micro-batches per timed step (gradient sync off for the first),
    beside the replay's prediction of that step."""
    out = tmp_path / "advice.json"
    assert main(["advise", "--compute", str(tiny_mlp_trace), "--comm", str(LOOP2), "--sharded",
                 "--world-size", "2", "--grad-accum", "2", "--json", str(out), "--validate",
                 "--rounds", "1", "--iters", "2", "--warmup", "1", "--timeout-s", "60"]) == 0
    text = capsys.readouterr().out
    advice = json.loads(out.read_text())
    val = advice["validation"]
    assert val["grad_accum"] == 2
    assert val["micro_batches_per_step"] == {"default": 2.0, "optimum": 2.0}
    assert val["predicted_s"]["default"] == pytest.approx(
        advice["sharded"]["default"]["replay"]["iteration_s"])
    assert "optimizer steps of 2 micro-batches" in text and "predicted" in text
