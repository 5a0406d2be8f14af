"""Measuring compute kernels with and without an NCCL kernel beside them, on a SYNTHETIC Kineto
document whose answer is known (not measured data)."""

from __future__ import annotations

import gzip
import json

import pytest

from gradsched.errors import InputError
from gradsched.traces.overlap_kernels import measure_document, measure_trace, predicted_duration

S = 1.2  # the slowdown planted in the synthetic trace
D0 = 100.0  # us, the reference duration


def kernel(name: str, ts: float, dur: float, grid: int, **args: object) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0,
            "tid": 7 if not name.startswith("nccl") else 20,
            "args": {"device": 0, "grid": [grid, 1, 1], "block": [128, 1, 1], **args}}


def synthetic_doc() -> dict:
    """SYNTHETIC: one 'gemm' (216 blocks) run 4 times alone (100 us each), once entirely
    beside an 8-block NCCL kernel and once 60 % beside a 16-block one, both at the planted slowdown
    1.2; once 30 % beside one (partial: left out); a 'tiny' kernel with 2 references
    (dropped); an 'other' kernel whose references spread 3x (dropped)."""
    events = [kernel("gemm", t, D0, 216) for t in (0, 200, 400, 600)]
    full = D0 * S
    events += [kernel("gemm", 1000, full, 216),
               kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 990, 300, 8)]
    part = predicted_duration(D0, 0.6, S)
    events += [kernel("gemm", 2000, part, 216),
               kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2000 - 50, 50 + 0.6 * part, 16)]
    events += [kernel("gemm", 3000, 104, 216),
               kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3000 - 5, 5 + 0.3 * 104, 8)]
    events += [kernel("tiny", t, 50, 4) for t in (4000, 4100)]
    events += [kernel("tiny", 1100, 60, 4)]
    events += [kernel("other", t, d, 64) for t, d in ((5000, 20), (5100, 60), (5200, 40))]
    events += [kernel("other", 1150, 70, 64)]
    return {"traceEvents": events,
            "deviceProperties": [{"id": 0, "name": "SYNTHETIC A100", "numSms": 108}]}


def test_the_planted_slowdown_is_measured() -> None:
    frame = measure_document(synthetic_doc(), "synthetic")
    assert list(frame["kernel"]) == ["gemm"]  # tiny: 2 references; other: spread 3x
    row = frame.iloc[0]
    assert row["n_reference"] == 4 and row["n_overlapped"] == 2  # the 30 % one left out
    assert row["reference_s"] == pytest.approx(D0 * 1e-6)
    assert row["slowdown"] == pytest.approx(S)
    assert row["nccl_blocks"] == 12  # median of the NCCL grids beside it: 8 and 16
    assert (row["sm_count"], row["grid_blocks"], row["device"]) == (108, 216, "SYNTHETIC A100")
    assert row["weight_s"] == pytest.approx(D0 * 1e-6 * 1.6)  # d0 (f = 1 + f = 0.6)


def test_halves_keep_instances_apart(tmp_path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_doc()).encode()))
    first = measure_trace(path, "first-half")  # the kernels span 0-5240 us: 2620 splits
    assert list(first["kernel"]) == ["gemm"] and first["n_overlapped"].iloc[0] == 2
    assert measure_trace(path, "second-half").empty  # only 'other' lies there, 3 refs spread
    with pytest.raises(InputError, match="part must be"):
        measure_trace(path, "middle")
