"""Tau-b counted in numpy (:mod:`gradsched.reexec.kendall`) equals scipy's ``kendalltau``
bit for bit: the bootstrap's intervals of tau are unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from gradsched.reexec.kendall import tau_b_columns


@pytest.mark.parametrize("levels", [None, 3, 6])
def test_tau_b_equals_scipy(levels: int | None) -> None:
    rng = np.random.default_rng(11 if levels is None else levels)
    for _ in range(60):
        n = int(rng.integers(3, 25))
        draw = (lambda size: rng.normal(size=size)) if levels is None else (
            lambda size: rng.integers(0, levels, size=size).astype(float))
        x, ys = draw(n), draw((n, 10))
        ours = tau_b_columns(x, ys)
        for b in range(ys.shape[1]):
            want = kendalltau(x, ys[:, b]).statistic
            if math.isnan(want):
                assert math.isnan(ours[b])
            else:
                assert ours[b] == want


def test_degenerate_inputs_are_nan() -> None:
    assert np.isnan(tau_b_columns(np.array([1.0, 2.0]), np.array([2.0, 1.0]))).all()
    assert np.isnan(tau_b_columns(np.ones(4), np.arange(4.0))).all()
    got = tau_b_columns(np.arange(4.0), np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0],
                                                 [1.0, np.nan]]))
    assert math.isnan(got[0]) and math.isnan(got[1])
