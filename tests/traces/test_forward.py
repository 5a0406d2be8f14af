"""Forward time as an explicit, labelled input: assumed where a trace lacks it (and
labelled so), never replacing a measured one, and a clear error for a bad ratio."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError
from gradsched.traces import ComputeTrace
from gradsched.traces.forward import DEFAULT_FORWARD_RATIO, forward_measured, with_forward

REPO = Path(__file__).resolve().parents[2]
BCAFFE = REPO / "traces/compute/bcaffe/googlenet-tmp8comm.csv"
BCAFFE_COMM = REPO / "traces/comm/external/bcaffe-googlenet-tmp8comm.csv"
CPU = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"


def test_bcaffe_forward_is_assumed_and_labelled() -> None:
    trace = ComputeTrace.load(BCAFFE)
    assert not forward_measured(trace)
    assumed = with_forward(trace, None)
    assert DEFAULT_FORWARD_RATIO == 0.5
    assert assumed.frame["forward_s"].sum() == pytest.approx(
        0.5 * trace.frame["backward_s"].sum())
    assert assumed.meta["forward_ratio"] == 0.5
    assert "not measured" in assumed.meta["forward_assumption"]
    assert with_forward(trace, 0.0).frame["forward_s"].sum() == 0.0
    assert (trace.frame["forward_s"] == 0).all()  # the loaded trace is not changed


def test_a_measured_forward_is_never_replaced() -> None:
    trace = ComputeTrace.load(CPU)
    assert forward_measured(trace)
    assert with_forward(trace, None) is trace
    with pytest.raises(ConfigError, match="was measured"):
        with_forward(trace, 0.5)


@pytest.mark.parametrize("ratio", ["nan", "-1", "inf", "11"])
def test_bad_ratio_is_a_clear_error(ratio: str, tmp_path: Path, capsys) -> None:
    argv = ["replay", "--compute", str(BCAFFE), "--comm", str(BCAFFE_COMM),
            "--algorithms", "wfbp", "--forward-ratio", ratio, "-o", str(tmp_path / "r.csv")]
    with pytest.raises(SystemExit) as exc:  # refused by argparse itself (exit 2)
        main(argv)
    assert exc.value.code == 2
    assert "--forward-ratio" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()
