"""Kendall's tau-b of one ranking against many, by counting pairs (Kendall 1945, Biometrika
33(3), tau-b = (concordant - discordant) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2 pairs,
n1 and n2 the pairs tied in each ranking).

The bootstrap (:mod:`.uncertainty`) needs the tau of the predicted order against thousands
of resampled measured orders of a few dozen runs; counting the n(n-1)/2 pairs of all of
them at once in numpy replaces one ``scipy.stats.kendalltau`` call per resample. The value
is computed with the same integer counts and the same two divisions by square roots as
scipy's (``scipy/stats/_stats_py.py``, ``kendalltau``, variant ``'b'``), so it is equal bit
for bit (tests/reexec/test_kendall.py checks it on random rankings with and without ties).
"""

from __future__ import annotations

import math

import numpy as np


def tau_b_columns(x: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Tau-b of ``x`` (n values) against each column of ``ys`` (n x B); NaN for a column
    (or an ``x``) that is constant or holds a NaN, and for fewer than 3 values."""
    x = np.asarray(x, dtype=float)
    ys = np.asarray(ys, dtype=float).reshape(len(x), -1)
    n = len(x)
    out = np.full(ys.shape[1], math.nan)
    if n < 3 or np.isnan(x).any():
        return out
    i, j = np.triu_indices(n, k=1)
    sx = np.sign(x[i] - x[j]).astype(np.int64)
    x_ties = int(np.count_nonzero(sx == 0))
    pairs = n * (n - 1) // 2
    if x_ties == pairs:
        return out
    sy = np.sign(ys[i] - ys[j])
    y_ties = np.count_nonzero(sy == 0, axis=0)
    con_minus_dis = sx @ np.nan_to_num(sy).astype(np.int64)
    ok = (y_ties < pairs) & ~np.isnan(ys).any(axis=0)
    tau = (con_minus_dis[ok].astype(float) / math.sqrt(pairs - x_ties)
           / np.sqrt((pairs - y_ties[ok]).astype(float)))
    out[ok] = np.minimum(1.0, np.maximum(-1.0, tau))
    return out
