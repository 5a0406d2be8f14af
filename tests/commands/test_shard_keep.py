"""``gradsched shard plan|compare --grad-accum K --keep-unsharded-between-microbatches`` and
``gradsched shard run --grad-accum K``: the plan records the choice and prints the FSDP2
calls of each micro-batch, the rows say so, and a kept plan runs for real (2 gloo ranks,
the tiny MLP)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.plan_sharded import ShardedPlan, Unit

REPO = Path(__file__).resolve().parents[2]
TRACE = str(REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv")
COMM = str(REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv")
COMMON = ["--compute", TRACE, "--comm", COMM, "--world-size", "2", "--semantics", "blocking",
          "--grad-accum", "3"]
KEEP = "--keep-unsharded-between-microbatches"


def test_plan_records_the_choice_and_prints_the_micro_batch_calls(tmp_path: Path,
                                                                  capsys) -> None:
    plain, kept = tmp_path / "plain.json", tmp_path / "kept.json"
    assert main(["shard", "plan", *COMMON, "--algorithm", "fsdp2", "-o", str(plain)]) == 0
    plain_out = capsys.readouterr().out
    assert main(["shard", "plan", *COMMON, "--algorithm", "fsdp2", KEEP, "-o", str(kept)]) == 0
    kept_out = capsys.readouterr().out
    assert "keep_unsharded_between_microbatches" not in json.loads(plain.read_text())
    assert json.loads(kept.read_text())["keep_unsharded_between_microbatches"] is True
    assert "model.set_reshard_after_backward(False)" in kept_out
    assert "set_reshard_after_backward" not in plain_out

    def predicted(text: str) -> float:
        return float(text.split("predicted ")[1].split(" s per")[0])
    assert predicted(kept_out) < predicted(plain_out)  # fewer all-gathers per step


def test_compare_rows_say_the_parameters_are_kept(tmp_path: Path) -> None:
    plain, kept = tmp_path / "plain.csv", tmp_path / "kept.csv"
    assert main(["shard", "compare", *COMMON, "-o", str(plain)]) == 0
    assert main(["shard", "compare", *COMMON, KEEP, "-o", str(kept),
                 "--plans-dir", str(tmp_path / "plans")]) == 0
    one, two = pd.read_csv(plain), pd.read_csv(kept)
    assert "keep_unsharded_between_microbatches" not in one.columns
    assert two["keep_unsharded_between_microbatches"].all()
    assert (two["n_collectives"] < one["n_collectives"]).all()
    assert (two["iteration_s"] <= one["iteration_s"] + 1e-12).all()
    for path in (tmp_path / "plans").iterdir():
        assert ShardedPlan.load(path).keep_unsharded_between_microbatches, path.name


@pytest.mark.slow
def test_shard_run_times_steps_of_a_kept_plan(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    tensors = [(f"{i}.weight", f"{i}.bias") for i in (0, 2, 4)]  # tiny-mlp's Linear layers
    plan = ShardedPlan("kept", tuple(Unit(t) for t in tensors),
                       keep_unsharded_between_microbatches=True)
    plan.save(tmp_path / "kept.json")
    out = tmp_path / "run.csv"
    assert main(["shard", "run", "--model", "tiny-mlp", "--batch-size", "2", "--world-size",
                 "2", "--plan", str(tmp_path / "kept.json"), "--grad-accum", "2", "--rounds",
                 "1", "--iters", "2", "--warmup", "1", "--timeout-s", "60", "-o", str(out)]) == 0
    assert "optimizer steps of 2 micro-batches" in capsys.readouterr().out
    rows = pd.read_csv(out)
    assert len(rows) == 2 and (rows["grad_accum"] == 2).all() and (rows["iteration_s"] > 0).all()
