"""The piecewise alpha-beta fit: planted breakpoints found, continuous and monotone, and
inconsistent parameters refused. Traces are SYNTHETIC."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel.piecewise import PiecewiseCurve, fit_piecewise
from gradsched.errors import ConfigError
from tests.costmodel.test_base import SIZES, planted_piecewise


def test_piecewise_finds_planted_breakpoint_and_is_continuous_monotone() -> None:
    truth = planted_piecewise()
    curve = fit_piecewise(SIZES, truth.times(SIZES))
    assert curve.n_segments == 2
    assert curve.breakpoints_bytes[0] == pytest.approx(65536.0, rel=1e-9)
    assert curve.alpha_s == pytest.approx(20e-6, rel=1e-6)
    np.testing.assert_allclose(curve.slopes_s_per_byte, truth.slopes_s_per_byte, rtol=1e-6)
    dense = np.logspace(0, 10, 20001)
    t = curve.times(dense)
    assert np.all(np.diff(t) >= 0)
    for b in curve.breakpoints_bytes:
        eps = b * 1e-12
        assert curve.times(np.array([b - eps]))[0] == pytest.approx(curve.times(np.array([b]))[0],
                                                                    rel=1e-9)


def test_piecewise_three_regimes_with_noise_and_segment_bound() -> None:
    rng = np.random.default_rng(1)
    truth = PiecewiseCurve(30e-6, (4096.0, 1048576.0), (5e-9, 3e-10, 6e-11))
    noisy = truth.times(SIZES) * rng.normal(1.0, 0.01, SIZES.size)
    curve = fit_piecewise(SIZES, noisy)
    assert 3 <= curve.n_segments <= 4
    rel = np.abs(curve.times(SIZES) / truth.times(SIZES) - 1)
    assert rel.max() < 0.05
    assert fit_piecewise(SIZES, noisy, max_segments=2).n_segments <= 2
    assert fit_piecewise(SIZES[:5], noisy[:5]).n_segments == 1  # few points: one segment


def test_piecewise_rejects_inconsistent_parameters() -> None:
    with pytest.raises(ConfigError, match="slopes"):
        PiecewiseCurve(1e-6, (100.0,), (1e-9,))
    with pytest.raises(ConfigError, match="non-decreasing"):
        PiecewiseCurve(1e-6, (100.0,), (1e-9, -1e-9))
    with pytest.raises(ConfigError, match="increasing"):
        PiecewiseCurve(1e-6, (100.0, 50.0), (1e-9, 1e-9, 1e-9))
