r"""Analytic alpha-beta-gamma costs of collective algorithms, and the ``analytic`` model.

Notation (Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), Sec. 3): ``M`` bytes is the *whole* vector (the
all-reduce input; for reduce-scatter the input, for all-gather the output, as nccl-tests
``size``), ``P`` ranks, ``alpha`` seconds per message (per hop), ``beta`` seconds per byte
on one link, ``gamma`` seconds per byte of reduction compute. Communication model: each
rank can send one message and receive one message at the same time (full duplex, single
port); a message of n bytes costs alpha + n*beta (Hockney 1994). ``lg = ceil(log2 P)``;
for non-power-of-two P, ``P' = 2**floor(log2 P)`` and ``r = P - P'``.

Non-pipelined algorithms have the linear form T = a*alpha + M*(b*beta + c*gamma):

================ =========================================== ================================
collective       algorithm                                   a ; b ; c
================ =========================================== ================================
all_reduce       ring (Patarasuk & Yuan 2009)                2(P-1) ; 2(P-1)/P ; (P-1)/P
all_reduce       mst: binomial reduce + broadcast            2 lg ; 2 lg ; lg
all_reduce       rd: recursive doubling (Thakur Sec. 4.4)    log2 P ; log2 P ; log2 P
all_reduce       rhd: Rabenseifner halving+doubling          2 log2 P ; 2(P-1)/P ; (P-1)/P
reduce_scatter   ring                                        P-1 ; (P-1)/P ; (P-1)/P
reduce_scatter   rhd: recursive halving (Thakur Sec. 4.2)    log2 P ; (P-1)/P ; (P-1)/P
reduce_scatter   rd: recursive-doubling all-reduce, keep own  as all_reduce rd
reduce_scatter   mst: binomial reduce + binomial scatter     2 lg ; lg + (P-1)/P ; lg
all_gather       ring                                        P-1 ; (P-1)/P ; 0
all_gather       rd = rhd: recursive doubling / Bruck        lg ; (P-1)/P ; 0
all_gather       mst: binomial gather + broadcast            2 lg ; (P-1)/P + lg ; 0
broadcast        mst: binomial tree                          lg ; lg ; 0
broadcast        ring: scatter + ring all-gather (van de      lg + P-1 ; 2(P-1)/P ; 0
                 Geijn, Thakur Sec. 4.3)
broadcast        rd = rhd: scatter + recursive-doubling       2 lg ; 2(P-1)/P ; 0
                 all-gather (Thakur Sec. 4.3)
reduce           mst: binomial tree                          lg ; lg ; lg
reduce           ring: ring reduce-scatter + binomial gather  P-1+lg ; 2(P-1)/P ; (P-1)/P
reduce           rhd: Rabenseifner (Thakur Sec. 4.5)         2 log2 P ; 2(P-1)/P ; (P-1)/P
reduce           rd: recursive-doubling all-reduce            as all_reduce rd
p2p              any: one message between two ranks (Hockney)  1 ; 1 ; 0
================ =========================================== ================================

Non-power-of-two P for rd and rhd (Thakur et al. 2005 Sec. 4.4): r ranks first send their
whole vector to a partner, which reduces it (pre-step alpha + M beta + M gamma); the
power-of-two algorithm runs on P' ranks; then the partners send the result back
(post-step alpha + M beta for all-reduce; alpha + (M/P) beta for reduce-scatter; none
for reduce). The cost is therefore the P' cost plus non-negative extra terms.

Pipelined algorithms split the vector into chunks of ``b`` bytes (``k`` chunks per
pipeline, treated as the real number K/b >= 1, which makes the optimal chunk exact; a
whole number of chunks adds at most one step):

    T(b) = (S - 1 + K/b) * (alpha + u*b),    K = M / trees

with S the pipeline depth in steps and u the per-byte cost of one step at a rank:

* lp, linear pipeline over a chain (Wang et al., "Efficient communications in training
  large scale neural networks", 2017): broadcast S = P-1, u = beta; reduce S = P-1,
  u = beta + gamma; all-reduce = reduce towards the chain's end pipelined into a
  broadcast back, S = 2(P-1), u = 2 beta + gamma (a middle rank sends and receives two
  chunks per step). trees = 1.
* dbt, double binary tree (Sanders, Speck & Träff 2009): two complementary binary trees
  each carry half of the vector (trees = 2) and every rank is inner in at most one tree;
  depth d = floor(log2 P). Per step a rank receives/sends 2 chunks for broadcast
  (u = 2 beta, S = d), 2 and reduces 2 for reduce (u = 2 beta + 2 gamma, S = d), 4 for
  all-reduce = pipelined reduce then broadcast (u = 4 beta + 2 gamma, S = 2d).

Optimal chunk: dT/db = (S-1) u - K alpha / b^2 = 0 gives

    b* = sqrt(K alpha / ((S-1) u)),   T(b*) = (sqrt((S-1) alpha) + sqrt(K u))^2,

which for LP broadcast is Wang et al.'s b* = sqrt(M alpha / ((P-2) beta)). As M grows,
T(b*)/M -> u/trees: beta for LP broadcast, independent of P. For S = 1 (e.g. P = 2) or
u = 0 the whole vector is one chunk. Chunks are clamped to [1 byte, K].
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel, check_collective, register_model
from gradsched.costmodel.domain import BASIS_MEASURED, BASIS_UNKNOWN, DERIVED, CollectiveBasis
from gradsched.errors import ConfigError
from gradsched.io import round_significant
from gradsched.traces.columns import COLLECTIVES

LINEAR_ALGORITHMS: tuple[str, ...] = ("ring", "mst", "rd", "rhd")
PIPELINED_ALGORITHMS: tuple[str, ...] = ("lp", "dbt")
ALGORITHMS: tuple[str, ...] = LINEAR_ALGORITHMS + PIPELINED_ALGORITHMS
_PIPELINED_COLLECTIVES = ("all_reduce", "broadcast", "reduce")


FITTED_DIGITS = 6
"""Significant digits kept of a link parameter found by an iterative least-squares solver
(scipy's ``least_squares``, here and in :mod:`gradsched.costmodel.tuned`). The solver stops
at its tolerances (``xtol`` 1e-8 on the step), and with the log-ratio residuals the
minimum is flat: tightening the tolerances to 1e-15 moved the collectives' link
parameters by up to 4.5e-6 (relative), and numpy's AVX-512 and AVX2 ``exp``/``log`` paths
end the default solve up to 7e-10 apart. Digits past the sixth are therefore the solver's
path, not the data's (whose noise is per cent), and printed they made the outputs differ
between CPUs. Rounded here, every number computed from the fit is the same on every CPU
(unless a parameter lies within ~1e-9 of a rounding boundary)."""

def supports(collective: str, algorithm: str) -> bool:
    """Whether ``algorithm`` implements ``collective`` here."""
    if algorithm in LINEAR_ALGORITHMS:
        return collective in COLLECTIVES
    return algorithm in PIPELINED_ALGORITHMS and collective in _PIPELINED_COLLECTIVES


def algorithms_for(collective: str) -> list[str]:
    """Algorithms that implement ``collective``."""
    return [a for a in ALGORITHMS if supports(collective, a)]


def _check(collective: str, algorithm: str, world_size: int) -> None:
    check_collective(collective)
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if not supports(collective, algorithm):
        raise ConfigError(f"algorithm {algorithm!r} does not implement {collective}; "
                          f"use one of {', '.join(algorithms_for(collective))}")
    if int(world_size) != world_size or world_size < 1:
        raise ConfigError(f"world size must be an integer >= 1, got {world_size}")


def _logs(p: int) -> tuple[int, int, int]:
    """(ceil(log2 P), log2 P', r) with P' = 2**floor(log2 P), r = P - P'."""
    lg = math.ceil(math.log2(p)) if p > 1 else 0
    lpw = p.bit_length() - 1
    return lg, lpw, p - (1 << lpw)


def linear_coefficients(collective: str, algorithm: str, world_size: int
                        ) -> tuple[float, float, float]:
    """(a, b, c) with T = a*alpha + M*(b*beta + c*gamma) for a non-pipelined algorithm."""
    _check(collective, algorithm, world_size)
    if algorithm not in LINEAR_ALGORITHMS:
        raise ConfigError(f"{algorithm!r} is pipelined; its cost is not linear in M")
    p = int(world_size)
    if p == 1:
        return 0.0, 0.0, 0.0
    lg, lpw, r = _logs(p)
    f = (p - 1) / p
    pw = 1 << lpw
    fw = (pw - 1) / pw
    rd_ar = (lpw + 2.0, lpw + 2.0, lpw + 1.0) if r else (float(lpw),) * 3
    rhd_ar = (2.0 * lpw, 2 * fw, fw)
    if r:
        rhd_ar = (rhd_ar[0] + 2, rhd_ar[1] + 2, rhd_ar[2] + 1)
    table: dict[tuple[str, str], tuple[float, float, float]] = {
        ("all_reduce", "ring"): (2.0 * (p - 1), 2 * f, f),
        ("all_reduce", "mst"): (2.0 * lg, 2.0 * lg, float(lg)),
        ("all_reduce", "rd"): rd_ar,
        ("all_reduce", "rhd"): rhd_ar,
        ("reduce_scatter", "ring"): (p - 1.0, f, f),
        ("reduce_scatter", "rhd"): ((lpw + 2.0, fw + 1 + 1 / p, fw + 1) if r
                                    else (float(lpw), fw, fw)),
        ("reduce_scatter", "rd"): rd_ar,
        ("reduce_scatter", "mst"): (2.0 * lg, lg + f, float(lg)),
        ("all_gather", "ring"): (p - 1.0, f, 0.0),
        ("all_gather", "rd"): (float(lg), f, 0.0),
        ("all_gather", "rhd"): (float(lg), f, 0.0),
        ("all_gather", "mst"): (2.0 * lg, f + lg, 0.0),
        ("broadcast", "mst"): (float(lg), float(lg), 0.0),
        ("broadcast", "ring"): (lg + p - 1.0, 2 * f, 0.0),
        ("broadcast", "rd"): (2.0 * lg, 2 * f, 0.0),
        ("broadcast", "rhd"): (2.0 * lg, 2 * f, 0.0),
        ("reduce", "mst"): (float(lg), float(lg), float(lg)),
        ("reduce", "ring"): (p - 1.0 + lg, 2 * f, f),
        ("reduce", "rhd"): ((2.0 * lpw + 1, 2 * fw + 1, fw + 1) if r
                            else (2.0 * lpw, 2 * fw, fw)),
        ("reduce", "rd"): rd_ar,
    }
    if collective == "p2p":  # one message, whatever the algorithm name: alpha + M beta
        return 1.0, 1.0, 0.0
    return table[(collective, algorithm)]


def pipeline_parameters(collective: str, algorithm: str, world_size: int,
                        beta: float, gamma: float) -> tuple[int, int, float]:
    """(S steps of depth, trees, u seconds per chunk byte) of a pipelined algorithm."""
    _check(collective, algorithm, world_size)
    p = int(world_size)
    if algorithm == "lp":
        if collective == "broadcast":
            return p - 1, 1, beta
        if collective == "reduce":
            return p - 1, 1, beta + gamma
        return 2 * (p - 1), 1, 2 * beta + gamma
    d = max(1, p.bit_length() - 1)
    if collective == "broadcast":
        return d, 2, 2 * beta
    if collective == "reduce":
        return d, 2, 2 * beta + 2 * gamma
    return 2 * d, 2, 4 * beta + 2 * gamma


def optimal_chunk(collective: str, algorithm: str, nbytes: np.ndarray, world_size: int,
                  alpha: float, beta: float, gamma: float = 0.0) -> np.ndarray:
    """Optimal pipeline chunk b* = sqrt(K alpha / ((S-1) u)) in bytes, clamped to [1, K]."""
    steps, trees, u = pipeline_parameters(collective, algorithm, world_size, beta, gamma)
    k_bytes = np.asarray(nbytes, dtype=float) / trees
    if steps <= 1 or u <= 0 or alpha <= 0:
        return k_bytes.copy()
    b = np.sqrt(k_bytes * alpha / ((steps - 1) * u))
    return np.clip(b, np.minimum(1.0, k_bytes), k_bytes)


def cost(collective: str, algorithm: str, nbytes: np.ndarray | float, world_size: int,
         alpha: float, beta: float, gamma: float = 0.0,
         chunk_bytes: float | None = None) -> np.ndarray:
    """Time (seconds) of ``collective`` with ``algorithm``; vectorised over ``nbytes``.

    ``chunk_bytes`` applies to the pipelined algorithms (lp, dbt); None = optimal chunk.
    """
    m = np.asarray(nbytes, dtype=float)
    _check(collective, algorithm, world_size)
    if world_size == 1:
        return np.zeros_like(m)
    if algorithm in LINEAR_ALGORITHMS:
        a, b, c = linear_coefficients(collective, algorithm, world_size)
        return a * alpha + m * (b * beta + c * gamma)
    steps, trees, u = pipeline_parameters(collective, algorithm, world_size, beta, gamma)
    k_bytes = m / trees
    if chunk_bytes is None:
        chunk = optimal_chunk(collective, algorithm, m, world_size, alpha, beta, gamma)
    else:
        if not chunk_bytes > 0:
            raise ConfigError(f"chunk_bytes must be > 0, got {chunk_bytes}")
        chunk = np.minimum(float(chunk_bytes), k_bytes)
    safe = np.where(chunk > 0, chunk, 1.0)
    n_chunks = np.where(k_bytes > 0, np.maximum(k_bytes / safe, 1.0), 1.0)
    return (steps - 1 + n_chunks) * (alpha + u * chunk)


def best_cost(collective: str, nbytes: np.ndarray | float, world_size: int, alpha: float,
              beta: float, gamma: float = 0.0, chunk_bytes: float | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise minimum over the algorithms of ``collective``: (times, algorithm index).

    The index refers to :func:`algorithms_for` (``collective``).
    """
    stack = np.stack([cost(collective, a, nbytes, world_size, alpha, beta, gamma, chunk_bytes)
                      for a in algorithms_for(collective)])
    idx = np.argmin(stack, axis=0)
    return np.take_along_axis(stack, idx[None, ...], axis=0)[0], idx


def invert_alpha_beta(collective: str, algorithm: str, world_size: int, alpha_fit: float,
                      beta_fit: float, gamma: float = 0.0) -> tuple[float, float]:
    """Per-hop alpha and link beta from a Hockney fit T = alpha_fit + beta_fit*M at one P.

    Exact inversion of the linear form T = a*alpha + M*(b*beta + c*gamma):
    alpha = alpha_fit / a, beta = (beta_fit - c*gamma) / b (e.g. ring all-reduce:
    alpha = A / (2(P-1)), beta = (B - (P-1)/P gamma) / (2(P-1)/P)).
    """
    if world_size < 2:
        raise ConfigError("cannot derive per-hop parameters from a world size of 1")
    a, b, c = linear_coefficients(collective, algorithm, world_size)
    alpha = alpha_fit / a
    beta = (beta_fit - c * gamma) / b
    if beta < 0:
        raise ConfigError(f"gamma={gamma} s/byte exceeds the fitted per-byte time: the derived "
                          f"link beta would be negative ({beta:.3g})")
    return float(alpha), float(beta)


def fit_link_parameters(
    collective: str,
    algorithm: str,
    samples: list[tuple[int, np.ndarray, np.ndarray]],
    gamma: float = 0.0,
    chunk_bytes: float | None = None,
) -> tuple[float, float]:
    """(alpha, beta) minimising the relative error of ``cost`` over (P, bytes, seconds) samples.

    Linear algorithms: non-negative least squares on the rows [a, M b]/t (exact inversion of
    the formula when the samples lie on it). Pipelined algorithms: the cost is not linear
    in (alpha, beta) with the optimal chunk, so a bounded nonlinear least squares in
    log(alpha), log(beta) starts from the linear large-chunk approximation.
    """
    # imported here, not at the top: only fitting needs scipy.optimize, and every replay
    # imports this module for ``cost``
    from scipy.optimize import least_squares, nnls

    if algorithm not in ALGORITHMS:
        raise ConfigError(f"choose one algorithm (not {algorithm!r}) to derive link parameters; "
                          f"known: {', '.join(ALGORITHMS)}")
    if not samples:
        raise ConfigError("no samples to derive link parameters from")
    rows, rhs, weights = [], [], []
    for p, m, t in samples:
        if p < 2:
            raise ConfigError("cannot derive per-hop parameters from a world size of 1")
        m = np.asarray(m, dtype=float)
        t = np.asarray(t, dtype=float)
        if algorithm in LINEAR_ALGORITHMS:
            a, b, c = linear_coefficients(collective, algorithm, p)
        else:
            steps, trees, _ = pipeline_parameters(collective, algorithm, p, 1.0, 0.0)
            u_beta = pipeline_parameters(collective, algorithm, p, 1.0, 0.0)[2] / trees
            u_gamma = pipeline_parameters(collective, algorithm, p, 0.0, 1.0)[2] / trees
            a, b, c = float(steps), u_beta, u_gamma
        rows.append(np.column_stack([np.full_like(m, a), m * b]))
        rhs.append(t - c * m * gamma)
        weights.append(1.0 / t)
    design = np.vstack(rows) * np.concatenate(weights)[:, None]
    target = np.concatenate(rhs) * np.concatenate(weights)
    scale = np.maximum(design.max(axis=0), 1e-300)
    coef, _ = nnls(design / scale, target)
    alpha, beta = (coef / scale).tolist()
    if algorithm in LINEAR_ALGORITHMS:
        return float(alpha), float(beta)
    alpha = max(alpha, 1e-12)
    beta = max(beta, 1e-15)

    def resid(logp: np.ndarray) -> np.ndarray:
        al, be = np.exp(logp)
        parts = [cost(collective, algorithm, m, p, al, be, gamma, chunk_bytes) / t - 1.0
                 for p, m, t in samples]
        return np.concatenate(parts)

    sol = least_squares(resid, np.log([alpha, beta]), method="trf", x_scale=1.0)
    al, be = round_significant(np.exp(sol.x), FITTED_DIGITS)
    return float(al), float(be)


@register_model
class AnalyticModel(CommModel):
    """Alpha-beta-gamma formulas of collective algorithms; predicts any world size.

    ``algorithm`` is one name (or ``"best"``, the elementwise minimum over the algorithms
    implementing a collective) or a ``{collective: name}`` mapping; collectives missing
    from the mapping use ``"best"``.
    """

    kind = "analytic"

    def __init__(self, alpha: float, beta: float, gamma: float = 0.0,
                 algorithm: str | dict[str, str] = "ring",
                 chunk_bytes: float | None = None, meta: dict[str, Any] | None = None) -> None:
        for name, value in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
            if not (np.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value}")
        if chunk_bytes is not None and not chunk_bytes > 0:
            raise ConfigError(f"chunk_bytes must be > 0, got {chunk_bytes}")
        self.alpha, self.beta, self.gamma = float(alpha), float(beta), float(gamma)
        self.chunk_bytes = None if chunk_bytes is None else float(chunk_bytes)
        if isinstance(algorithm, str):
            mapping = {c: algorithm for c in COLLECTIVES}
        else:
            mapping = {c: algorithm.get(c, "best") for c in COLLECTIVES}
            for c in algorithm:
                check_collective(c)
        for c, alg in mapping.items():
            if alg == "best":
                continue
            if alg not in ALGORITHMS:
                raise ConfigError(f"unknown algorithm {alg!r}; known: best, "
                                  f"{', '.join(ALGORITHMS)}")
            if not supports(c, alg):
                if not isinstance(algorithm, str):
                    _check(c, alg, 2)  # raises: the mapping names an impossible pair
                # one pipelined name for every collective: ring where it is undefined
                mapping[c] = "ring"
        self.algorithms = mapping
        self.meta = dict(meta or {})

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        check_collective(collective)
        alg = self.algorithms[collective]
        if alg == "best":
            return best_cost(collective, nbytes, int(world_size), self.alpha, self.beta,
                             self.gamma, self.chunk_bytes)[0]
        return cost(collective, alg, nbytes, int(world_size), self.alpha, self.beta, self.gamma,
                    self.chunk_bytes)

    def fit_world_sizes(self) -> tuple[int, ...] | None:
        """The world sizes the parameters were fitted at, in the formula's ``P``:
        ``meta["extrapolation"]["fit_world_sizes"]`` or ``meta["fit_world_sizes"]``
        (``gradsched fit --cross-world-size``). Fitted with ``P`` = nodes
        (``meta["scale_by"] == "nodes"``), the node counts of the fitted series recorded in
        ``meta["domain"]``; ``None`` where nothing is recorded (then the basis is unknown)."""
        record = self.extrapolation() or {}
        fitted = record.get("fit_world_sizes", self.meta.get("fit_world_sizes"))
        if not isinstance(fitted, list) or not fitted:
            return None
        try:
            ranks = tuple(sorted({int(w) for w in fitted}))
        except (TypeError, ValueError):
            return None
        if self.meta.get("scale_by", "world_size") == "world_size":
            return ranks
        nodes = {int(r["nodes"]) for r in self.meta.get("domain") or ()
                 if isinstance(r, dict) and r.get("world_size") in ranks and "nodes" in r}
        return tuple(sorted(nodes)) or None

    def measured_collectives(self) -> tuple[str, ...]:
        """The collectives whose measurements the parameters were fitted to
        (``meta["domain"]`` records, or ``meta["collectives"]``); empty where unknown."""
        names = {str(r["collective"]) for r in self.meta.get("domain") or ()
                 if isinstance(r, dict) and "collective" in r}
        listed = self.meta.get("collectives")
        if isinstance(listed, list):
            names |= {str(c) for c in listed}
        return tuple(sorted(names))

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """Measured for a collective the fit saw; derived (through the algorithm's
        formula) for one it did not; unknown where the model records neither."""
        check_collective(collective)
        measured = self.measured_collectives()
        if not measured:
            return (CollectiveBasis(collective, BASIS_UNKNOWN),)
        if collective in measured:
            return (CollectiveBasis(collective, BASIS_MEASURED),)
        source = "all_reduce" if "all_reduce" in measured else measured[0]
        return (CollectiveBasis(collective, DERIVED, source),)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind, "alpha_s": self.alpha, "beta_s_per_byte": self.beta,
            "gamma_s_per_byte": self.gamma, "algorithm": dict(sorted(self.algorithms.items())),
            "chunk_bytes": self.chunk_bytes,
        }
        if self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnalyticModel:
        return cls(float(data["alpha_s"]), float(data["beta_s_per_byte"]),
                   float(data.get("gamma_s_per_byte", 0.0)), data.get("algorithm", "ring"),
                   data.get("chunk_bytes"), data.get("meta"))
