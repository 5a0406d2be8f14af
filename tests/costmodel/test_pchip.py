"""The numpy PCHIP (:mod:`gradsched.costmodel.pchip`) equals scipy's, bit for bit, inside the
knots: the interp model's prices, and so every replay on a measured comm trace, are unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import PchipInterpolator

from gradsched.costmodel.pchip import Pchip


@pytest.mark.parametrize("shape", ["increasing", "noisy", "plateaus", "two-points"])
def test_pchip_equals_scipy_bit_for_bit(shape: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = 2 if shape == "two-points" else int(rng.integers(3, 30))
        x = np.unique(rng.uniform(0.0, 30.0, n))
        if x.size < 2:
            continue
        if shape == "noisy":
            y = rng.normal(0.0, 1.0, x.size)
        elif shape == "plateaus":
            y = np.round(rng.normal(0.0, 1.0, x.size))
        else:
            y = np.cumsum(rng.exponential(1.0, x.size))
        at = np.concatenate([rng.uniform(x[0], x[-1], 100), x])
        ours = Pchip(x, y)(at)
        theirs = PchipInterpolator(x, y, extrapolate=True)(at)
        assert ours.view(np.int64).tolist() == theirs.view(np.int64).tolist()
