"""The interference factors and their calibration (a small real launch: 2 gloo ranks on
loopback, the tiny MLP)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")

from gradsched import units
from gradsched.capture import interference
from gradsched.cli import main
from gradsched.errors import ConfigError


# ----------------------------------------------------------------------------- interference
def test_parse_size_and_factors():
    assert units.parse_size("8M") == 8 * 1024**2
    assert units.parse_size("4096") == 4096
    with pytest.raises(ConfigError):
        units.parse_size("lots")
    rec = {"compute_alone_s": [1.0, 1.0, 1.0], "compute_with_comm_s": [1.2, 1.4, 9.0],
           "compute_with_comm_overlapped": [True, True, False],
           "comm_alone_s": [0.1, 0.1], "comm_with_compute_s": [0.08, 0.08]}
    out = interference.factors([{"rounds": [rec]}])
    assert math.isclose(out["compute_slowdown"], 1.3)  # the non-overlapped rep is dropped
    assert math.isclose(out["comm_slowdown_raw"], 0.8) and out["comm_slowdown"] == 1.0
    assert out["collective_cpu_s"] == 0.0  # no small-collective phase in this record
    none = dict(rec, compute_with_comm_overlapped=[False] * 3)
    with pytest.raises(ConfigError):
        interference.factors([{"rounds": [none]}])
    # With the small-collective phase: 1.0 s alone; with small collectives 1.2 s for 100
    # completed -> 2 ms each; with large ones 1.56 s for 5 completed -> (1.56) / (1.0 +
    # 5 x 2 ms) = 1.5446...; a repetition that ran dry (False) is dropped.
    full = dict(rec, compute_with_comm_s=[1.56, 1.56, 9.0],
                compute_with_comm_completed=[5, 5, 1],
                compute_with_small_s=[1.2, 1.2, 5.0],
                compute_with_small_overlapped=[True, True, False],
                compute_with_small_completed=[100, 100, 1])
    out = interference.factors([{"rounds": [full]}, {"rounds": [full]}])
    assert math.isclose(out["collective_cpu_s"], 0.002)
    assert math.isclose(out["compute_slowdown"], 1.56 / 1.01)
    assert len(out["collective_cpu_s_per_round"]) == 2


@pytest.mark.slow
def test_interference_calibration_runs(tmp_path):
    out = tmp_path / "inter.json"
    assert main(["reexec", "interference", "--rounds", "1", "--reps", "2", "--kernel",
                 "matmul", "--comm-bytes", "256K", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["compute_slowdown"] >= 1.0 and data["comm_slowdown"] >= 1.0
    assert data["backend"] == "gloo" and len(data["raw"]) == 2
    rec = data["raw"][0]["rounds"][0]
    for key in ("compute_alone_s", "compute_with_comm_s", "comm_alone_s",
                "comm_with_compute_s", "compute_with_small_s", "compute_with_small_completed",
                "small_comm_alone_s"):
        assert rec[key]
    assert data["collective_cpu_s"] >= 0.0 and data["small_bytes"] == 4096


def test_settings_and_launch_are_checked_before_any_rank_starts():
    from gradsched.distributed.placement import Launch

    with pytest.raises(ConfigError, match="--rounds and --reps"):
        interference.Calibration(rounds=0)
    with pytest.raises(ConfigError, match="unknown kernel"):
        interference.Calibration(kernel="fft")
    assert interference.Calibration(reps=40).all_reduces == 10
    assert interference.Calibration(reps=4).all_reduces == 3
    with pytest.raises(ConfigError, match="world-size >= 2"):
        interference.calibrate(interference.Calibration(), Launch(world_size=1))
    with pytest.raises(ConfigError, match="busy"):
        interference.calibrate(interference.Calibration(),
                               Launch(world_size=2, busy_limit_cores=1.0))
