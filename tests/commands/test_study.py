"""``gradsched study``: the studies that run cases write their frame as a CSV; ``report``
keeps only the verbs that format."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
COMM = REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv"


def test_sharded_writes_every_planner_of_every_case(tmp_path: Path) -> None:
    out = tmp_path / "sharded.csv"
    assert main(["study", "sharded", "--case", "rn18", str(TRACE), "tbf1gbit", str(COMM), "2",
                 "blocking", "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert set(frame["compute"]) == {"rn18"} and set(frame["semantics"]) == {"blocking"}
    assert {"fsdp2", "sharded-optimum"} <= set(frame["algorithm"])


def test_sharded_refuses_an_unknown_semantics(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sharded.csv"
    assert main(["study", "sharded", "--case", "rn18", str(TRACE), "tbf1gbit", str(COMM), "2",
                 "eager", "-o", str(out)]) == 2
    assert "--case rn18: semantics must be streams or blocking" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("verb", ["ps-replay", "topology-check", "topology-replay",
                                  "scaling-check", "sharded"])
def test_the_report_verbs_no_longer_run_studies(verb: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["report", verb, "--help"])
    assert exit_info.value.code == 2
