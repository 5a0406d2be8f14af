"""Piecewise cubic Hermite interpolation that keeps monotone data monotone (PCHIP), in numpy.

Slopes at the knots from Fritsch & Carlson (SIAM J. Numer. Anal. 17(2), 1980): zero where the
neighbouring secants differ in sign or one is zero, else the weighted harmonic mean of the two
secants with weights w1 = 2 h_k + h_(k-1), w2 = h_k + 2 h_(k-1) (Fritsch & Butland 1984); the
end slopes from the one-sided three-point formula, set to zero when its sign differs from the
end secant's and to three times the secant when the secants change sign and it exceeds that
(Moler, *Numerical Computing with MATLAB*, Sec. 3.6, ``pchiptx.m``). Each interval is the
cubic Hermite polynomial in s = x - x_k, summed term by term c3 + c2 s + c1 s^2 + c0 s^3.

Written so that every value equals, bit for bit, what ``scipy.interpolate.PchipInterpolator``
returns at points inside the knots (tests/costmodel/test_pchip.py checks it on random
series): :mod:`.interp` prices every replay with it, and importing ``scipy.interpolate``
loads ``scipy.optimize`` and ``scipy.special`` besides.
"""

from __future__ import annotations

import numpy as np


def _end_slope(h0: float, h1: float, m0: float, m1: float) -> float:
    """One-sided three-point slope at an end, kept to the end secant's sign (Moler 3.6)."""
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    if np.sign(d) != np.sign(m0):
        return 0.0
    if np.sign(m0) != np.sign(m1) and abs(d) > 3.0 * abs(m0):
        return 3.0 * m0
    return float(d)


def knot_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The PCHIP slope at each knot of the strictly increasing ``x``."""
    h = x[1:] - x[:-1]
    m = (y[1:] - y[:-1]) / h
    d = np.zeros_like(y)
    if y.size == 2:
        d[:] = m[0]
        return d
    flat = (np.sign(m[1:]) != np.sign(m[:-1])) | (m[1:] == 0) | (m[:-1] == 0)
    w1 = 2 * h[1:] + h[:-1]
    w2 = h[1:] + 2 * h[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        harmonic = (w1 / m[:-1] + w2 / m[1:]) / (w1 + w2)
    inner = d[1:-1]
    inner[~flat] = 1.0 / harmonic[~flat]
    d[0] = _end_slope(h[0], h[1], m[0], m[1])
    d[-1] = _end_slope(h[-1], h[-2], m[-1], m[-2])
    return d


class Pchip:
    """The PCHIP interpolant through (``x``, ``y``); ``x`` strictly increasing, >= 2 knots.
    Points outside the knots use the end intervals' polynomials."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        d = knot_slopes(self.x, y)
        h = np.diff(self.x)
        secant = np.diff(y) / h
        t = (d[:-1] + d[1:] - 2 * secant) / h
        self.coef = (t / h, (secant - d[:-1]) / h - t, d[:-1], y[:-1])

    def __call__(self, at: np.ndarray) -> np.ndarray:
        at = np.asarray(at, dtype=float)
        k = np.clip(np.searchsorted(self.x, at, side="right") - 1, 0, self.x.size - 2)
        s = at - self.x[k]
        c0, c1, c2, c3 = (c[k] for c in self.coef)
        s2 = s * s
        return 0.0 + c3 + c2 * s + c1 * s2 + c0 * (s2 * s)
