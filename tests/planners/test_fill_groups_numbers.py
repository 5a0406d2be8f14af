"""fill_groups reads float64/int64 sizes as Python numbers: the same group ends as reading
them as numpy scalars one by one (the list of scalars takes that path). Sizes are
SYNTHETIC, with caps hit exactly and crossed."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.planners._family import fill_groups


@pytest.mark.parametrize("overflow", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_python_numbers_give_the_same_ends(overflow, dtype) -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        sizes = rng.integers(1, 2**26, size=int(rng.integers(1, 300))).astype(dtype)
        limits = [float(sizes[:3].sum()), float(rng.integers(2**20, 2**28))]
        got = fill_groups(sizes, limits, overflow=overflow)
        assert np.array_equal(got, fill_groups(list(sizes), limits, overflow=overflow))
