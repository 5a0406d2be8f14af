"""``gradsched advise --sharded``: FSDP2's per-block layout against the optimum, the
``fully_shard`` calls to paste, a clear error for a memory cap no plan meets, and
``--validate`` with stock FSDP2 on two gloo ranks (the tiny MLP's trace is captured in the
test; the inline alpha-beta network is SYNTHETIC, the measured times are real)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.cli import main
from tests.test_advise import _fails

REPO = Path(__file__).resolve().parents[1]
R18 = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
TBF1G = REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv"


def test_sharded_advice_prints_the_layout_and_its_decision(tmp_path: Path, capsys) -> None:
    out = tmp_path / "advice.json"
    assert main(["advise", "--compute", str(R18), "--comm", str(TBF1G), "--sharded",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    advice = json.loads(out.read_text())["sharded"]
    assert advice["semantics"] == "blocking"  # a CPU trace: FSDP2 on gloo
    assert "fully_shard(u0, reshard_after_forward=" in text and "fully_shard(model)" in text
    gain, margin = advice["gain_pct"], advice["margin_pct"]
    assert advice["recommendation"] == ("optimum" if gain > margin else "keep-fsdp2-default")
    assert advice["optimum"]["replay"]["iteration_s"] <= \
        advice["default"]["replay"]["iteration_s"]


def test_a_memory_cap_no_plan_meets_is_said_in_the_advice(capsys) -> None:
    code = main(["advise", "--compute", str(R18), "--comm", str(TBF1G), "--sharded",
                 "--memory-cap", "1K"])
    out = capsys.readouterr().out
    assert code == 0
    assert "RECOMMENDATION: no layout of whole blocks fits: the smallest peak found is" in out


def test_sharded_options_need_sharded(capsys) -> None:
    _fails(capsys, ["advise", "--compute", str(R18), "--comm", str(TBF1G), "--memory-cap",
                    "600M"], "--memory-cap, --gpu-memory and --semantics need --sharded")


@pytest.mark.slow
def test_sharded_validate_runs_stock_fsdp2(tiny_mlp_trace: Path, tmp_path: Path,
                                           capsys) -> None:
    out = tmp_path / "advice.json"
    code = main(["advise", "--compute", str(tiny_mlp_trace), "--comm",
                 "alpha-beta:alpha=1e-3,beta=3e-7", "--world-size", "2", "--sharded",
                 "--validate", "--rounds", "1", "--iters", "2", "--warmup", "1",
                 "--timeout-s", "60", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    val = json.loads(out.read_text())["validation"]
    assert val["units_match"] == {"default": True, "optimum": True}
    assert all(len(v) == 2 and min(v) > 0 for v in val["iteration_s"].values())
    speed = val["speedup_optimum_over_default"]
    assert 0 < speed["low"] <= speed["high"]
    assert "FSDP2 formed exactly the plans' units" in captured.out
