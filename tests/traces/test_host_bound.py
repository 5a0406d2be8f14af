"""A compute trace says whether its capture found the GPU waiting on the host, and how much
its compute varied between the processes that measured it; replay rows carry both."""

from __future__ import annotations

import pytest

from gradsched.costmodel.base import load_comm_spec
from gradsched.experiments import compare
from gradsched.traces.bundle import ComputeTrace
from tests.conftest import synthetic_compute_trace

H200 = "traces/compute/h200/bert-base-s128-b32-cuda-bf16"


def test_the_committed_host_bound_h200_trace_says_so(repo) -> None:
    corrected = ComputeTrace.load(repo / f"{H200}-corrected.csv")
    assert corrected.host_bound is True
    assert corrected.compute_spread == pytest.approx(1.397, rel=1e-3)
    raw = ComputeTrace.load(repo / f"{H200}.csv")
    assert raw.host_bound is None and raw.compute_spread is None


def test_replay_rows_carry_the_trace_s_host_bound_flag_and_spread() -> None:
    trace = synthetic_compute_trace()
    trace.meta["correction"] = {"host_bound": True, "spread": {"max_over_min": 1.25}}
    rows = compare(trace, load_comm_spec("alpha-beta:alpha=1e-4,beta=1e-9"), 2, ["wfbp"])
    assert rows.loc[0, "compute_bound_by"] == "host"
    assert rows.loc[0, "compute_spread"] == 1.25
    assert rows.loc[0, "world_size_basis"] == "unknown"
