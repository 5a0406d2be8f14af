"""The host-check study on committed H200 configurations: both replays of a trace with
host columns against the hook-free CUDA-event iteration of the same process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.experiments.host_check import cases_from_summary, host_check, summary
from gradsched.traces.bundle import ComputeTrace

TRACES = Path("traces/compute/h200-kineto")
SUMMARY = Path("data/h200/kineto-steps/kineto-steps-summary.json")


def check(*stems: str):
    return host_check(cases_from_summary([TRACES / f"{s}.csv" for s in stems], SUMMARY))


def test_gpu_bound_configuration_both_replays_within_five_percent():
    (row,) = check("resnet50-b128-cuda-fp32").itertuples(index=False)
    assert row.measured_ms == pytest.approx(60.04, abs=0.01)  # 20.39 + 39.65 ms, 8 threads
    assert abs(row.single_stream_error_pct) < 5
    assert abs(row.host_aware_error_pct) < 5
    assert row.host_aware_ms >= row.single_stream_ms  # the host only ever delays


def test_host_bound_configuration_the_host_sets_the_iteration():
    """bert-base bf16: the GPU is busy about a quarter of the step. The single stream
    predicts the kernels (a third of the iteration); the host-aware replay predicts the
    host, which the profiler slowed (what the table reports: an overestimate)."""
    (row,) = check("bert-base-s128-b32-cuda-bf16").itertuples(index=False)
    assert row.single_stream_error_pct < -50
    assert row.host_aware_ms == pytest.approx(row.host_ms, rel=0.05)
    assert row.host_aware_ms > row.measured_ms


def test_summary_is_median_and_worst():
    frame = check("resnet50-b128-cuda-fp32", "bert-base-s128-b32-cuda-bf16",
                  "vgg16-b64-cuda-fp32")
    stats = summary(frame)
    err = frame["host_aware_error_pct"].abs()
    assert stats["host_aware_median_abs_error_pct"] == pytest.approx(err.median())
    assert stats["host_aware_worst_abs_error_pct"] == pytest.approx(err.max())


def test_profiler_excess_per_launch_is_not_a_constant():
    """The two host-bound bf16 BERTs: host time less the unprofiled iteration, per launch of
    the trace (each row's forward and backward launches), by hand; it differs between them
    by more than a factor of two, so no constant cost per launch corrects the profile."""
    frame = check("bert-base-s128-b32-cuda-bf16", "bert-large-s128-b16-cuda-bf16")
    for row in frame.itertuples(index=False):
        trace = ComputeTrace.load(TRACES / f"{row.config}.csv").frame
        launches = int(trace["forward_launches"].sum() + trace["backward_launches"].sum())
        assert row.launches == launches
        assert row.host_excess_us_per_launch == pytest.approx(
            (row.host_ms - row.measured_ms) * 1e3 / launches)
    base, large = frame["host_excess_us_per_launch"]
    assert large > 2 * base > 0
