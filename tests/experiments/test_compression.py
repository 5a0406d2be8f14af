"""Compression in the replay: it pays on a slow network and not on a fast one (with a
synthetic compute cost and with the one measured on this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.compression import make_compressor
from gradsched.compression.pricing import (
    ComputeCost,
    compute_cost_from_profile,
)
from gradsched.costmodel import AlphaBetaModel
from gradsched.experiments.compression import compressed_replay
from gradsched.plan import Bucket, Plan
from tests.conftest import synthetic_compute_trace


def _trace_and_plan() -> tuple[object, Plan]:
    trace = synthetic_compute_trace(n=6, seed=1, forward_s=1e-3, bytes_scale=1 << 16)
    names = list(trace.frame["name"])[::-1]
    return trace, Plan("wfbp", tuple(Bucket((n,)) for n in names))


def test_compression_pays_on_slow_network_not_on_fast() -> None:
    """A compressed plan is predicted faster on a slow network (bandwidth dominates) and
    slower on a fast one, where its own compute time dominates."""
    trace, plan = _trace_and_plan()
    comp = make_compressor("importance", "1/64")
    compute = ComputeCost(50e-6, 2e-9)  # selection cost per element (order of profile)
    slow = AlphaBetaModel(alpha=50e-6, beta=1 / 125e6)  # ~1 Gbit/s
    fast = AlphaBetaModel(alpha=5e-6, beta=1 / 100e9)  # ~800 Gbit/s
    on_slow = compressed_replay(trace, plan, slow, comp, 8, compute)
    on_fast = compressed_replay(trace, plan, fast, comp, 8, compute)
    assert on_slow["compressed"].iteration_s < on_slow["dense"].iteration_s
    assert on_slow["speedup"] > 1.5
    assert on_fast["compressed"].iteration_s > on_fast["dense"].iteration_s
    # without the compute cost, compression never loses on this plan
    free = compressed_replay(trace, plan, fast, comp, 8, ComputeCost())
    assert free["compressed"].iteration_s <= free["dense"].iteration_s + 1e-12


def test_measured_profile_crossover() -> None:
    """With the compute cost MEASURED on this machine (committed ``profile.csv``,
    ``gradsched compress profile``): importance-weighted pruning at density 1/64 is predicted
    faster than dense on a 1 Gbit/s alpha-beta network and slower on a 100 Gbit/s one, where
    its selection time per element exceeds the all-reduce's transfer time per element."""
    profile = Path(__file__).resolve().parents[2] / "paper/data/compression/profile.csv"
    if not profile.is_file():
        pytest.skip("no committed compressor profile")
    cost = compute_cost_from_profile(profile, "importance", 1 / 64, column="compute_s_min")
    assert cost.s_per_element > 0
    trace, plan = _trace_and_plan()
    comp = make_compressor("importance", "1/64")
    slow = AlphaBetaModel(alpha=50e-6, beta=1 / 125e6)  # 1 Gbit/s
    fast = AlphaBetaModel(alpha=5e-6, beta=1 / 12.5e9)  # 100 Gbit/s
    on_slow = compressed_replay(trace, plan, slow, comp, 8, cost)
    on_fast = compressed_replay(trace, plan, fast, comp, 8, cost)
    assert on_slow["speedup"] > 1.0
    assert on_fast["speedup"] < 1.0
