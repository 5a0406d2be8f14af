"""Segmented (piecewise-linear) fit of T(M) over message-size regimes.

Collective libraries switch protocol with the message size (NCCL's LL / LL128 / Simple,
MPI's eager / rendezvous), so one Hockney line T = alpha + beta*M (Hockney 1994) fits
badly over 5 decades of time. The piecewise model uses a Hockney line per regime:

    T(M) = alpha + sum_i s_i * clip(M - x_i, 0, x_{i+1} - x_i),   x_0 = 0 < x_1 < ... < x_{k-1}

i.e. a continuous polyline with k segments, knots (breakpoints) x_1..x_{k-1} in bytes and
slopes s_i >= 0 (seconds per byte), alpha >= 0. Continuity and ``s_i >= 0`` make it
continuous and non-decreasing by construction.

Fit (:func:`fit_piecewise`): for fixed breakpoints the model is linear in
(alpha, s_0..s_{k-1}); we minimise the squared *relative* error
sum(((T(M_j)-t_j)/t_j)^2) (times span ~5 decades, so absolute least squares would ignore
small messages) with non-negative least squares (Lawson & Hanson NNLS). Breakpoints are
searched over the measured sizes and the geometric midpoints between them (at most 64,
log-spaced): greedily added one at a time, then refined coordinate-wise. The number of
segments k <= ``max_segments`` (default 4) is chosen by the Bayesian information
criterion on the relative residuals, BIC = n ln(RSS/n) + 2k ln n (2k parameters: alpha,
k slopes, k-1 breakpoints), with RSS floored at n*1e-8 (0.01 % rms relative error) so
that noiseless data picks the smallest exact model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.costmodel.base import register_model
from gradsched.costmodel.formulas import FITTED_DIGITS
from gradsched.costmodel.series import SeriesModel
from gradsched.errors import ConfigError
from gradsched.io import round_significant

MAX_SEGMENTS = 4
MAX_CANDIDATES = 64  # breakpoint candidates searched (log-spaced subset for long series)
_RSS_FLOOR = 1e-8  # per point: (1e-4 relative rms)^2


@dataclass(frozen=True)
class PiecewiseCurve:
    """A continuous, non-decreasing polyline T(M) (seconds of bytes)."""

    alpha_s: float
    breakpoints_bytes: tuple[float, ...]
    slopes_s_per_byte: tuple[float, ...]

    def __post_init__(self) -> None:
        bps = np.asarray(self.breakpoints_bytes, dtype=float)
        slopes = np.asarray(self.slopes_s_per_byte, dtype=float)
        if slopes.size != bps.size + 1:
            raise ConfigError(f"piecewise curve: {slopes.size} slopes for {bps.size} breakpoints "
                              "(need one more slope than breakpoints)")
        if not (np.isfinite(self.alpha_s) and self.alpha_s >= 0):
            raise ConfigError(f"piecewise curve: alpha_s must be finite and >= 0, "
                              f"got {self.alpha_s}")
        if np.any(~np.isfinite(slopes)) or np.any(slopes < 0):
            raise ConfigError("piecewise curve: slopes must be finite and >= 0 (non-decreasing)")
        if np.any(~np.isfinite(bps)) or np.any(bps <= 0) or np.any(np.diff(bps) <= 0):
            raise ConfigError("piecewise curve: breakpoints must be positive and increasing")
        knots = np.concatenate([[0.0], bps])
        values = self.alpha_s + np.concatenate([[0.0], np.cumsum(slopes[:-1] * np.diff(knots))])
        object.__setattr__(self, "_knots", knots)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_slopes", slopes)

    @property
    def n_segments(self) -> int:
        return len(self.slopes_s_per_byte)

    def times(self, nbytes: np.ndarray) -> np.ndarray:
        """Vectorised T(M): one searchsorted and one fused multiply-add."""
        m = np.asarray(nbytes, dtype=float)
        knots: np.ndarray = self._knots  # type: ignore[attr-defined]
        if knots.size == 1:
            return self.alpha_s + self.slopes_s_per_byte[0] * m
        idx = np.searchsorted(knots, m, side="right") - 1
        np.clip(idx, 0, None, out=idx)
        return self._values[idx] + self._slopes[idx] * (m - knots[idx])  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha_s": float(self.alpha_s),
            "breakpoints_bytes": [float(b) for b in self.breakpoints_bytes],
            "slopes_s_per_byte": [float(s) for s in self.slopes_s_per_byte],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PiecewiseCurve:
        return cls(float(data["alpha_s"]), tuple(float(b) for b in data["breakpoints_bytes"]),
                   tuple(float(s) for s in data["slopes_s_per_byte"]))


class _Problem:
    """Precomputed hinge columns h_c(M) = max(M - x_c, 0)/t for every candidate knot x_c.

    A segment column clip(M - x_i, 0, x_{i+1} - x_i) equals h_i - h_{i+1}, so a design
    matrix for any breakpoint set is a few column differences (fast inner loop).
    """

    def __init__(self, nbytes: np.ndarray, times: np.ndarray, cands: np.ndarray) -> None:
        self.nbytes = nbytes
        self.cands = cands
        knots = np.concatenate([[0.0], cands])
        self.hinge = np.maximum(nbytes[:, None] - knots[None, :], 0.0) / times[:, None]
        self.ones = 1.0 / times
        self.target = np.ones_like(times)
        # points <= x and points < x for every knot (index 0 is x = 0)
        self.le = np.searchsorted(nbytes, knots, side="right")
        self.lt = np.searchsorted(nbytes, knots, side="left")

    def valid(self, idx: tuple[int, ...], min_points: int) -> bool:
        """Each segment [x_i, x_{i+1}] holds at least ``min_points`` points."""
        lo = (0, *idx)
        n = self.nbytes.size
        for a, b in zip(lo, (*idx, None), strict=True):
            hi_count = n if b is None else int(self.le[b])
            if hi_count - int(self.lt[a]) < min_points:
                return False
        return True

    def solve(self, idx: tuple[int, ...]) -> tuple[float, np.ndarray]:
        """Relative-error NNLS for breakpoints at candidate columns ``idx`` (1-based)."""
        cols = [self.ones]
        knots = (0, *idx)
        for j, a in enumerate(knots):
            col = self.hinge[:, a]
            if j + 1 < len(knots):
                col = col - self.hinge[:, knots[j + 1]]
            cols.append(col)
        design = np.column_stack(cols)
        scale = np.abs(design).max(axis=0)
        scale[scale == 0] = 1.0
        from scipy.optimize import nnls  # fitting only: a replay loads no scipy.optimize

        coef, _ = nnls(design / scale, self.target, maxiter=50 * design.shape[1])
        coef = coef / scale
        resid = design @ coef - 1.0
        return float(resid @ resid), coef

    def breakpoints(self, idx: tuple[int, ...]) -> tuple[float, ...]:
        return tuple(float(self.cands[i - 1]) for i in idx)


def _candidates(nbytes: np.ndarray, limit: int = MAX_CANDIDATES) -> np.ndarray:
    """Interior sizes and geometric midpoints; thinned to ``limit`` log-spaced ones."""
    inner = nbytes[1:-1]
    mids = np.sqrt(nbytes[:-1] * nbytes[1:])
    cands = np.unique(np.concatenate([inner, mids]))
    if cands.size > limit:
        grid = np.geomspace(cands[0], cands[-1], limit)
        picks = np.searchsorted(cands, grid).clip(0, cands.size - 1)
        cands = np.unique(cands[picks])
    return cands


def _search(prob: _Problem, start: tuple[int, ...], min_points: int
            ) -> tuple[float, tuple[int, ...]]:
    """Greedy: add one breakpoint to ``start``, then refine each coordinate-wise (2 passes)."""
    n_cands = prob.cands.size
    best_rss, best = np.inf, start
    for c in range(1, n_cands + 1):
        if c in start:
            continue
        idx = tuple(sorted((*start, c)))
        if not prob.valid(idx, min_points):
            continue
        rss, _ = prob.solve(idx)
        if rss < best_rss:
            best_rss, best = rss, idx
    if not np.isfinite(best_rss):
        return np.inf, start
    for _ in range(2):
        improved = False
        for i in range(len(best)):
            others = best[:i] + best[i + 1:]
            for c in range(1, n_cands + 1):
                if c in best:
                    continue
                idx = tuple(sorted((*others, c)))
                if not prob.valid(idx, min_points):
                    continue
                rss, _ = prob.solve(idx)
                if rss < best_rss * (1 - 1e-12):
                    best_rss, best, improved = rss, idx, True
        if not improved:
            break
    return best_rss, best


def fit_piecewise(
    nbytes: np.ndarray,
    times: np.ndarray,
    max_segments: int = MAX_SEGMENTS,
    n_segments: int | None = None,
) -> PiecewiseCurve:
    """Fit a :class:`PiecewiseCurve` to sorted positive (bytes, seconds) points.

    ``n_segments`` forces the number of segments; otherwise it is chosen by BIC among
    1..min(max_segments, n//3) (each segment must contain >= 2 points, at least 3 points
    per segment on average).
    """
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    n = m.size
    if n < 2:
        raise ConfigError(f"piecewise fit needs at least 2 message sizes, got {n}")
    upper = max(1, min(max_segments, n // 3))
    ks = [n_segments] if n_segments is not None else list(range(1, upper + 1))
    if n_segments is not None and not 1 <= n_segments <= max(1, n // 2):
        raise ConfigError(f"cannot fit {n_segments} segments to {n} points")
    prob = _Problem(m, t, _candidates(m))
    results: dict[int, tuple[float, tuple[int, ...]]] = {}
    idx: tuple[int, ...] = ()
    results[1] = (prob.solve(())[0], ())
    for k in range(2, max(ks) + 1):
        if results[k - 1][0] <= n * _RSS_FLOOR and n_segments is None:
            break  # already exact to the floor: more segments cannot lower the BIC
        rss, idx = _search(prob, idx, min_points=2)
        if not np.isfinite(rss):
            break
        results[k] = (rss, idx)
    usable = [k for k in ks if k in results]
    if not usable:
        usable = [max(results)]

    def bic(k: int) -> float:
        rss = max(results[k][0], n * _RSS_FLOOR)
        return n * np.log(rss / n) + 2 * k * np.log(n)

    k_best = min(usable, key=lambda k: (bic(k), k))
    idx = results[k_best][1]
    _, coef = prob.solve(idx)
    # NNLS's last bits follow the BLAS kernel (OpenBLAS picks one per CPU): the parameters
    # keep FITTED_DIGITS, so a fit, and every plan a replay derives from it, is the same on
    # every CPU (an exact tie in a planner's program would otherwise flip)
    coef = round_significant(coef, FITTED_DIGITS)
    return PiecewiseCurve(float(coef[0]), prob.breakpoints(idx),
                          tuple(float(s) for s in coef[1:]))


@register_model
class PiecewiseModel(SeriesModel):
    """Segmented linear fit per (collective, world size); see the module docstring."""

    kind = "piecewise"

    def _curve_times(self, params: PiecewiseCurve, nbytes: np.ndarray) -> np.ndarray:
        return params.times(nbytes)

    @staticmethod
    def curve_to_dict(params: PiecewiseCurve) -> dict[str, Any]:
        return params.to_dict()

    @staticmethod
    def curve_from_dict(data: dict[str, Any]) -> PiecewiseCurve:
        return PiecewiseCurve.from_dict(data)
