"""Refusals that name what the user typed: the plan file, or the option (on commit 181ccde
these named no file, "field 'param_sync': ...", or a derived cell of an in-memory trace,
"<memory>, line 3, row 2, field 'forward_s'").

The plan is ``plan --algorithm deepspeed_zero``'s (format version 3) on a committed trace,
with its ``optimizer`` edited to contradict its ``param_sync``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.cli import main
from tests.conftest import REPO
from tests.robustness.refusal import refused

COMPUTE = str(REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv")
COMM = str(REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv")


@pytest.fixture
def inconsistent_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    good = tmp_path / "zero.json"
    assert main(["plan", "--compute", COMPUTE, "--comm", COMM, "--algorithm",
                 "deepspeed_zero", "-o", str(good)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    data = json.loads(good.read_text(encoding="utf-8"))
    assert data["format_version"] == 3 and data["param_sync"]
    data["optimizer"] = "replicated"
    bad = tmp_path / "inconsistent.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    return bad


def test_plan_from_names_the_plan_file(inconsistent_plan: Path, capsys) -> None:
    refused(["plan", "--compute", COMPUTE, "--from", str(inconsistent_plan), "--emit", "ddp"],
            capsys, "inconsistent.json", "field 'param_sync'", "optimizer=sharded")


def test_run_plan_names_the_plan_file(inconsistent_plan: Path, capsys, no_ranks) -> None:
    refused(["run", "--model", "resnet18", "--batch-size", "4", "--world-size", "2", "-o",
             str(inconsistent_plan.with_name("r.csv")), "--plan", str(inconsistent_plan)],
            capsys, "inconsistent.json", "field 'param_sync'")
    assert no_ranks == []


@pytest.mark.parametrize(("option", "value"), [("--mfu", "1e-300"),
                                               ("--micro-batch", "1000000")])
def test_traces_flops_names_the_option(tmp_path: Path, capsys, option: str,
                                       value: str) -> None:
    out = tmp_path / "f.csv"
    line = refused(["traces", "flops", "--model", "llama-2-70b", option, value, "-o",
                    str(out)], capsys, f"{option} {value}", "physical range")
    assert "<memory>" not in line and "forward_s" not in line
    assert not out.exists()
