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


def test_no_slowdown_inside_a_full_bisection_domain() -> None:
    from gradsched.costmodel.nccl.hardware import PRESETS
    from gradsched.costmodel.nccl.tuning import Params, nccl_default_params

    base = nccl_default_params(PRESETS["abci-v100"])
    k = FABRIC_PER_DOUBLING
    free = Params(base.intra, base.inter, k, 2, 34)
    plain = Params(base.intra, base.inter, k, 2, 0)
    bus = base.inter.busbw_Bps
    assert [free.inter_busbw_Bps(n) for n in (2, 4, 16, 32, 34)] == [bus] * 5
    assert plain.inter_busbw_Bps(32) < bus
    # beyond the domain the slowdown counts its doublings from the domain's size
    assert free.inter_busbw_Bps(68) == pytest.approx(bus / slowdown(68, 34, k))
    assert free.inter_busbw_Bps(68) > plain.inter_busbw_Bps(68)


def test_every_abci_vnode_sweep_ran_inside_one_block_of_34_hosts() -> None:
    # the assumption behind ABCI V-nodes' full-bisection domain of 34 nodes (hardware.py
    # FULL_BISECTION_NODES): each sweep's hosts (g0NNN) fall in one rack-sized block
    import re

    from gradsched.costmodel.nccl.hardware import FULL_BISECTION_NODES, from_trace_meta

    size = FULL_BISECTION_NODES["ABCI V-node"]
    logs = sorted((REPO / "data/external/nccl-tests").glob("abci-inter-vnode-*.txt"))
    assert len(logs) == 5
    for log in logs:
        hosts = {int(h) for h in re.findall(r" on +g(\d+) ", log.read_text())}
        assert len({(h - 1) // size for h in hosts}) == 1, log.name
    meta = {"hardware": "ABCI V-nodes (4x V100-SXM2-16GB per node, NVLink2, 2x InfiniBand "
                        "EDR-100 per node); NCCL 2.8.4", "devices": ["Tesla V100-SXM2-16GB"]}
    assert from_trace_meta(meta, 8, 2).full_bisection_nodes == size
    meta["hardware"] = meta["hardware"].replace("V-nodes", "A-nodes").replace("V100", "A100")
    meta["devices"] = ["A100-SXM4-40GB"]
    assert from_trace_meta(meta, 16, 2).full_bisection_nodes == 0
