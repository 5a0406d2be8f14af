"""The NCCL model prices a size once and looks it up after: the same times, bit for bit, as
pricing every size afresh, whether asked one size at a time or many at once."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel.nccl.envelope import monotone_times, piece_starts
from gradsched.costmodel.nccl.hardware import parse_hardware
from gradsched.costmodel.nccl.model import NCCLModel
from gradsched.costmodel.nccl.tuning import nccl_default_params


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather"])
def test_memoised_prices_equal_fresh_ones(collective: str) -> None:
    hw = parse_hardware("h100-8x400g")
    model = NCCLModel(hw, nccl_default_params(hw))
    rng = np.random.default_rng(2)
    for world in (2, 16, 1024):
        sizes = np.exp(rng.uniform(0.0, np.log(1e10), 400))
        sizes = np.concatenate([sizes, sizes[:50], np.round(sizes[:20])])
        starts, suffix = piece_starts(hw, model.params, collective, world)
        fresh = monotone_times(hw, model.params, collective, sizes, world, starts, suffix)
        one_by_one = [model.raw_times(collective, np.array([v]), world)[0] for v in sizes[:60]]
        assert np.array_equal(np.array(one_by_one), fresh[:60])
        assert np.array_equal(model.raw_times(collective, sizes, world), fresh)
        assert np.array_equal(model.raw_times(collective, sizes.reshape(2, -1), world),
                              fresh.reshape(2, -1))
