"""The Bayesian optimiser's standard normal (:mod:`math.erfc`, no scipy.stats) against
scipy's: the same values to an ulp, and the same points chosen on random objectives."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from gradsched.planners import _bayesopt
from gradsched.planners._bayesopt import Search, minimize_1d, normal_cdf, normal_pdf


def test_normal_matches_scipy() -> None:
    t = np.concatenate([np.linspace(-30.0, 40.0, 20001),
                        np.random.default_rng(3).normal(0.0, 3.0, 20000)])
    # (below -37 scipy's distribution function underflows to 0 before erfc does)
    assert np.allclose(normal_cdf(t), norm.cdf(t), rtol=1e-13, atol=0.0)
    assert np.array_equal(normal_pdf(t), norm.pdf(t))
    assert normal_cdf(np.zeros((2, 3))).shape == (2, 3)


@pytest.mark.parametrize("seed", range(12))
def test_same_points_as_with_scipy(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    centre, width, bumps = rng.uniform(-3, 3), rng.uniform(0.2, 2), rng.uniform(0, 0.3, 3)

    def objective(x: float) -> float:
        v = np.log(x)
        return float((v - centre) ** 2 / width + bumps @ np.sin(np.arange(1, 4) * 5 * v))

    search = Search(1e-3, 1e3, iterations=14, initial=(1.0,), seed=seed)
    ours = minimize_1d(objective, search)
    monkeypatch.setattr(_bayesopt, "normal_cdf", norm.cdf)
    monkeypatch.setattr(_bayesopt, "normal_pdf", norm.pdf)
    theirs = minimize_1d(objective, search)
    assert ours.xs == theirs.xs and ours.ys == theirs.ys
