"""A small, seeded Gaussian-process Bayesian optimiser for one knob on a (log) interval.

Used to tune DeAR's fusion threshold (Zhang et al., ICDCS 2023, tune it with Bayesian
optimisation) and ByteScheduler's partition size (Peng et al., SOSP 2019, Sec. 4.3).
Gaussian process with a Matern-5/2 kernel on the unit interval, the length-scale picked by
marginal likelihood from a fixed grid, expected improvement maximised over a fixed grid of
candidates (Jones, Schonlau & Welch 1998). numpy and :mod:`math` only (the standard normal's
distribution function from :func:`math.erfc`, so that tuning loads no ``scipy.stats``);
deterministic for a seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gradsched.errors import ConfigError
from gradsched.ties import first_min, same_time

_LENGTH_SCALES = (0.05, 0.1, 0.2, 0.35, 0.6, 1.0)
_NOISE = 1e-6
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def normal_cdf(t: np.ndarray) -> np.ndarray:
    """The standard normal's distribution function, Phi(t) = erfc(-t / sqrt 2) / 2 (Abramowitz
    & Stegun 26.2.29 with 7.1.2), element by element."""
    return np.array([0.5 * math.erfc(-float(v) * _SQRT_HALF) for v in np.ravel(t)],
                    dtype=float).reshape(np.shape(t))


def normal_pdf(t: np.ndarray) -> np.ndarray:
    """The standard normal's density, exp(-t^2 / 2) / sqrt(2 pi)."""
    return np.exp(-np.asarray(t, dtype=float) ** 2 / 2.0) / _SQRT_2PI


@dataclass
class BOResult:
    """Every evaluated point in evaluation order, and the best one."""

    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)

    @property
    def best_index(self) -> int:
        """The fastest evaluation; evaluations whose times tie (:func:`gradsched.ties.
        same_time`) go to the earliest."""
        return first_min(self.ys)

    @property
    def best_x(self) -> float:
        return self.xs[self.best_index]

    @property
    def best_y(self) -> float:
        return self.ys[self.best_index]


def _matern52(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    d = np.abs(a[:, None] - b[None, :]) / scale
    s5 = math.sqrt(5.0) * d
    return (1.0 + s5 + 5.0 / 3.0 * d * d) * np.exp(-s5)


def _fit(u: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Length-scale of best marginal likelihood, its Cholesky factor and weights."""
    best: tuple[float, float, np.ndarray, np.ndarray] | None = None
    for scale in _LENGTH_SCALES:
        k = _matern52(u, u, scale) + _NOISE * np.eye(len(u))
        chol = np.linalg.cholesky(k)
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
        nll = 0.5 * float(y @ alpha) + float(np.log(np.diag(chol)).sum())
        if best is None or nll < best[0]:
            best = (nll, scale, chol, alpha)
    assert best is not None
    return best[1], best[2], best[3]


def expected_improvement(u: np.ndarray, y: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """EI (for minimisation) of ``cand`` given observations ``(u, y)`` on [0, 1]."""
    mean, std = float(np.mean(y)), float(np.std(y))
    # a spread within the tie tolerance is noise: standardising it would blow it up to O(1)
    flat = std == 0 or same_time(mean + std, mean)
    z = np.zeros_like(y) if flat else (y - mean) / std
    scale, chol, alpha = _fit(u, z)
    ks = _matern52(cand, u, scale)
    mu = ks @ alpha
    v = np.linalg.solve(chol, ks.T)
    var = np.maximum(1.0 - np.sum(v * v, axis=0), 1e-12)
    sigma = np.sqrt(var)
    gap = z.min() - mu
    t = gap / sigma
    return gap * normal_cdf(t) + sigma * normal_pdf(t)


@dataclass(frozen=True)
class Search:
    """One search's settings, checked once when built: the interval [``lo``, ``hi``],
    ``iterations`` evaluations in total, on a log scale or not; ``initial`` points are
    evaluated first, then ``n_random`` seeded (``seed``) random points, then the
    expected-improvement maximiser over ``grid`` candidates."""

    lo: float
    hi: float
    iterations: int
    log_scale: bool = True
    initial: tuple[float, ...] = ()
    n_random: int = 2
    seed: int = 0
    grid: int = 257

    def __post_init__(self) -> None:
        if not (0 < self.lo < self.hi) and self.log_scale:
            raise ConfigError(f"log-scale search needs 0 < lo < hi, got [{self.lo}, {self.hi}]")
        if self.iterations < 1:
            raise ConfigError(f"the search needs at least 1 evaluation, got {self.iterations}")
        object.__setattr__(self, "initial", tuple(self.initial))


def minimize_1d(objective: Callable[[float], float], search: Search) -> BOResult:
    """Minimise ``objective`` over [``search.lo``, ``search.hi``] with ``search.iterations``
    evaluations in total.

    ``search.initial`` points are evaluated first, then ``search.n_random`` seeded random
    points, then the expected-improvement maximiser over ``search.grid`` candidates (never a
    point already evaluated).
    """
    lo, hi, iterations, log_scale = search.lo, search.hi, search.iterations, search.log_scale
    initial, n_random, seed, grid = search.initial, search.n_random, search.seed, search.grid
    to_u, from_u = _transforms(lo, hi, log_scale)
    rng = np.random.default_rng(seed)
    cand = np.linspace(0.0, 1.0, grid)
    result = BOResult()
    us: list[float] = []
    queue = [float(np.clip(to_u(x), 0.0, 1.0)) for x in initial]
    queue += [float(v) for v in rng.uniform(0.0, 1.0, size=n_random)]
    while len(result.xs) < iterations:
        if queue:
            u = queue.pop(0)
        else:
            u = _next_point(np.asarray(us), np.asarray(result.ys), cand)
            if u is None:
                break
        x = float(from_u(u))
        result.xs.append(x)
        result.ys.append(float(objective(x)))
        us.append(u)
    return result


def _next_point(u: np.ndarray, y: np.ndarray, cand: np.ndarray) -> float | None:
    fresh = cand[np.min(np.abs(cand[:, None] - u[None, :]), axis=1) > 0.5 / len(cand)]
    if fresh.size == 0:
        return None
    ei = expected_improvement(u, y, fresh)
    return float(fresh[int(np.argmax(ei))])


def _transforms(lo: float, hi: float,
                log_scale: bool) -> tuple[Callable[[float], float], Callable[[float], float]]:
    if log_scale:
        a, b = math.log(lo), math.log(hi)
        return (lambda x: (math.log(x) - a) / (b - a)), (lambda u: math.exp(a + u * (b - a)))
    return (lambda x: (x - lo) / (hi - lo)), (lambda u: lo + u * (hi - lo))
