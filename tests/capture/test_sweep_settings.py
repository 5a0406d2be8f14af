"""The collective sweep's settings: geometric sizes with both ends, sizes rounded for the split
collectives, nccl-tests' bus factors, p2p on exactly two ranks."""

from __future__ import annotations

import pytest

from gradsched.capture.sweep_settings import (
    SweepConfig,
    bus_factor,
    geometric_sizes,
    parse_collectives,
    round_sizes,
)
from gradsched.errors import ConfigError


def test_geometric_sizes_include_both_ends():
    assert geometric_sizes(4, 64, 2) == [4, 8, 16, 32, 64]
    assert geometric_sizes(4, 100, 4) == [4, 16, 64]
    with pytest.raises(ConfigError, match="factor"):
        geometric_sizes(4, 64, 1)
    with pytest.raises(ConfigError, match="min-bytes"):
        geometric_sizes(64, 4, 2)


def test_split_collectives_round_to_four_bytes_per_rank():
    sizes, notes = round_sizes("all_gather", [4, 8, 16, 32], 3)
    assert sizes == [12, 24, 36]
    assert all(s % 12 == 0 for s in sizes)
    assert notes and "rounded up to multiples of 12 bytes" in notes[0]
    assert round_sizes("all_reduce", [4, 8], 3) == ([4, 8], [])


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 4) == pytest.approx(1.5)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_scatter", 2) == pytest.approx(0.5)
    assert bus_factor("broadcast", 8) == 1.0
    with pytest.raises(ConfigError):
        parse_collectives("all_reduce,alltoall")
    assert parse_collectives("all")[0] == "all_reduce"


def test_p2p_needs_exactly_two_ranks():
    with pytest.raises(ConfigError, match="world-size 2"):
        SweepConfig(world_size=3, collectives=["p2p"]).validate()
    SweepConfig(world_size=2, collectives=["p2p", "all_reduce"]).validate()
