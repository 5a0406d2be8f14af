"""``gradsched plan`` with a ByteScheduler partition whose parts exceed the collective budget:
a plan, coarsened, and a note saying so (the committed CPU traces: resnet18 on gloo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.limits import MAX_COLLECTIVES_PER_ITERATION
from gradsched.plan import Plan

REPO = Path(__file__).resolve().parents[2]
COMPUTE = str(REPO / "traces" / "compute" / "cpu" / "resnet18-b4-cpu-fp32.csv")
COMM = str(REPO / "traces" / "comm" / "cpu" / "gloo-tbf1gbit-p2.csv")


def test_a_partition_over_the_budget_is_coarsened_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "bs.json"
    code = main(["plan", "--compute", COMPUTE, "--comm", COMM, "--algorithm", "bytescheduler",
                 "--knob", "partition_params=1", "--knob", "search=none", "-o", str(out)])
    assert code == 0
    err = capsys.readouterr().err
    assert "note: partition of 1 parameters coarsened to" in err
    plan = Plan.load(out)
    assert plan.n_collectives <= MAX_COLLECTIVES_PER_ITERATION
    assert plan.info["partition_coarsened"]["used_params"] == plan.info["partition_params"] > 1
