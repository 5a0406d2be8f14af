"""The monotone interpolation model: through the points, monotone, linear beyond them, and
non-monotone noise pooled."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel.interp import InterpCurve, isotonic_increasing
from tests.costmodel.test_base import SIZES, planted_piecewise


def test_interp_passes_through_points_is_monotone_and_extrapolates_linearly() -> None:
    t = planted_piecewise().times(SIZES)
    curve, pooled = InterpCurve.from_points(SIZES, t)
    assert pooled == 0
    np.testing.assert_allclose(curve.times(SIZES), t, rtol=1e-12)
    dense = np.logspace(-1, 11, 30001)
    pred = curve.times(dense)
    assert np.all(np.diff(pred) >= 0) and np.all(pred > 0)
    # above the range: the line from the last point with the upper points' slope (one segment)
    slope = (t[-1] - t[-2]) / (SIZES[-1] - SIZES[-2])
    assert curve.times(np.array([4 * SIZES[-1]]))[0] == pytest.approx(
        t[-1] + slope * 3 * SIZES[-1], rel=1e-12)
    # below the range: never above the first point, never negative
    assert 0 <= curve.times(np.array([0.0]))[0] <= t[0]


def test_interp_pools_non_monotone_noise() -> None:
    t = 1e-5 + 1e-10 * SIZES
    t[10] *= 0.5  # a glitch: faster than the smaller size
    curve, pooled = InterpCurve.from_points(SIZES, t)
    assert pooled >= 2
    assert np.all(np.diff(curve.times(np.logspace(0, 10, 5000))) >= 0)
    iso = isotonic_increasing(np.array([1.0, 3.0, 2.0, 4.0]))
    np.testing.assert_allclose(iso, [1.0, 2.5, 2.5, 4.0])
