"""The collectives' dtypes on the command line: ``shard plan|compare|dtypes`` and
``advise --sharded`` with ``--param-dtype``, ``--reduce-dtype`` and
``--float8-all-gather``, and the table of ``shard dtypes``.

The LLM trace is the FLOPs model's (SYNTHETIC: modelled, not measured), one published shape
cut to two decoder layers to keep it fast; the comm model an inline alpha-beta line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.llm_shapes import llm_shape
from gradsched.traces.flops import FlopsSetting, flops_trace

AB = "alpha-beta:alpha=1e-4,beta=1e-10"


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> str:
    """SYNTHETIC: Llama-3.1-8B's shape with two decoder layers, priced on an H100."""
    from dataclasses import replace

    shape = replace(llm_shape("llama-3.1-8b"), layers=2)
    trace = flops_trace(shape, FlopsSetting(seq_len=1024, gpu="h100"))
    path = tmp_path_factory.mktemp("llm") / "l.csv"
    trace.save(path)
    return str(path)


def _plan(llm: str, out: Path, *extra: str) -> dict:
    assert main(["shard", "plan", "--compute", llm, "--comm", AB, "--world-size", "8",
                 "--algorithm", "fsdp2", "-o", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_float8_all_gather_halves_the_all_gathers_of_an_llm(llm: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    """--float8-all-gather: the plan records it, prints torchao's call, and the linear
    weights' all-gathers move one byte per element (bf16 trace: half)."""
    plain = _plan(llm, tmp_path / "a.json", "--param-dtype", "bf16", "--reduce-dtype", "fp32")
    out = capsys.readouterr().out
    fp8 = _plan(llm, tmp_path / "b.json", "--param-dtype", "bf16", "--reduce-dtype", "fp32",
                "--float8-all-gather")
    out8 = capsys.readouterr().out
    assert plain["mixed_precision"] == {"param_dtype": "bf16", "reduce_dtype": "fp32",
                                        "float8_all_gather": False}
    assert fp8["mixed_precision"]["float8_all_gather"] is True
    assert "enable_fsdp_float8_all_gather=True" in out8 and "torchao" not in out
    assert "mp_policy=mp" in out

    def seconds(text: str) -> float:
        return float(text.split("predicted ")[1].split(" s")[0])

    assert seconds(out8) < seconds(out)


def test_advise_refuses_dtypes_without_sharded_and_prints_the_policy(
        llm: str, capsys: pytest.CaptureFixture) -> None:
    base = ["advise", "--compute", llm, "--comm", AB, "--world-size", "8"]
    assert main([*base, "--reduce-dtype", "fp32"]) != 0
    assert "--reduce-dtype sets the dtypes of FSDP2's collectives: it needs --sharded" in \
        capsys.readouterr().err
    assert main([*base, "--sharded", "--param-dtype", "bf16", "--reduce-dtype", "fp32",
                 "--float8-all-gather", "--gpu-memory", "80G"]) == 0
    out = capsys.readouterr().out
    assert "bf16/fp32+fp8ag" in out and "torchtitan" in out
    assert "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)" in out


def test_shard_dtypes_and_its_table(llm: str, tmp_path: Path) -> None:
    """One row per policy and layout; float8 halves the all-gathered bytes of the linear
    weights; fp32 reduction doubles the reduce-scattered bytes; the table formats it."""
    csv = tmp_path / "d.csv"
    assert main(["shard", "dtypes", "--compute", llm, "--comm", AB, "--world-size", "8",
                 "--label", "l8b", "-o", str(csv)]) == 0
    frame = pd.read_csv(csv)
    assert len(frame) == 9
    one = frame[frame["layout"] == "fsdp2"].set_index("policy")
    assert one.loc["bf16/fp32", "reduce_scatter_bytes"] == pytest.approx(  # CSV: 9 digits
        2 * one.loc["bf16", "reduce_scatter_bytes"], rel=1e-8)
    assert one.loc["bf16/fp32+fp8", "all_gather_bytes"] < one.loc["bf16/fp32",
                                                                   "all_gather_bytes"]
    assert one.loc["bf16/fp32", "all_gather_bytes"] == one.loc["bf16", "all_gather_bytes"]
    assert main(["report", "sharded-dtypes-table", "--input", str(csv), "--tex",
                 str(tmp_path / "t.tex"), "--md", str(tmp_path / "t.md")]) == 0
    assert "torchtitan (2024)" in (tmp_path / "t.md").read_text()
