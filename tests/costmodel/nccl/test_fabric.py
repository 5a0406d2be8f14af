"""The fabric slowdown: its constants are the committed public numbers, and its fit."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.costmodel.nccl.fabric import (
    FABRIC_PER_DOUBLING,
    ISSUE_1229_BUSBW_GBPS,
    fit_per_doubling,
    slowdown,
)

REPO = Path(__file__).resolve().parents[3]


def test_constants_equal_the_committed_csv() -> None:
    frame = pd.read_csv(REPO / "data/external/nccl-issue-1229/reduce_scatter_busbw.csv")
    assert dict(zip(frame["nodes"], frame["busbw_GBps"], strict=True)) == ISSUE_1229_BUSBW_GBPS


def test_the_fit_reproduces_the_reported_decline() -> None:
    assert abs(FABRIC_PER_DOUBLING - 0.0946) < 5e-4
    b4 = ISSUE_1229_BUSBW_GBPS[4]
    for nodes, busbw in ISSUE_1229_BUSBW_GBPS.items():
        assert b4 / slowdown(nodes, 4, FABRIC_PER_DOUBLING) == pytest.approx(busbw, rel=0.04)
    # a flat series gives no slowdown
    assert fit_per_doubling({4: 100.0, 8: 100.0, 16: 100.0}) == pytest.approx(0.0, abs=1e-12)


def test_slowdown_is_one_at_the_reference_and_grows_with_nodes() -> None:
    k = FABRIC_PER_DOUBLING
    assert slowdown(2, 2, k) == 1.0
    values = [slowdown(n, 2, k) for n in (2, 4, 8, 16, 32, 1024)]
    assert values == sorted(values) and values[-1] > 1.5
    assert slowdown(64, 2, 0.0) == 1.0
