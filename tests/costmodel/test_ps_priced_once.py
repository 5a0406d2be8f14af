"""The parameter-server model keeps each size it priced: the same prices whatever the batch
a size comes in and however often it is asked. The link is a planted alpha-beta model."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.costmodel.ps import ParameterServer, PSModel


@pytest.mark.parametrize("colocated", [True, False])
@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter"])
def test_prices_kept_are_the_prices_computed(colocated: bool, collective: str) -> None:
    def model() -> PSModel:
        return PSModel(ParameterServer(4, 2, colocated, AlphaBetaModel(1e-4, 1e-9), 1000,
                                       "balanced"))

    sizes = np.array([1.0, 999.0, 1000.0, 1001.0, 4096.0, 2.5e6, 1000.0, 1.0])
    kept = model()
    first = kept.raw_times(collective, sizes, 4)
    again = kept.raw_times(collective, sizes[::-1].reshape(2, 4), 4)
    fresh = model()
    one_by_one = [float(fresh.raw_times(collective, np.array([s]), 4)[0]) for s in sizes]
    alone = model()
    direct = [alone.push_pull_s(s) if collective == "all_reduce" else alone.push_s(s)
              for s in sizes.tolist()]
    assert first.tolist() == one_by_one == direct
    assert again.ravel().tolist() == first[::-1].tolist()
    assert kept.raw_times(collective, np.zeros((0,)), 4).shape == (0,)
