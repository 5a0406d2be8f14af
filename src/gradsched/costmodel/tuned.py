"""Per-algorithm formula fits and the ``tuned`` cost model (the fastest algorithm per size).

Fitting (:func:`fit_formulas`). The alpha-beta-gamma formulas of
:mod:`gradsched.costmodel.formulas` (Thakur, Rabenseifner & Gropp 2005 for ring, MST,
recursive doubling and Rabenseifner's halving/doubling; Patarasuk & Yuan 2009 for the
ring; Wang et al. 2017 for linear pipelining with chunk ``b``) are fitted to measured
per-algorithm sweeps (``gradsched bench collectives``), per network:

* **joint**: one (alpha, beta, gamma) for all algorithms and world sizes -- the claim of
  the formulas is that one set of link parameters explains every algorithm. beta and
  gamma are separable only across algorithms (their ratio differs: 2:1 for ring/RHD/MST,
  1:1 for recursive doubling, 2:1 + pipeline for LP), which noisy data do poorly, so
  gamma is better fixed to a direct measurement of the add (``gamma``; the bench
  records one);
* **per-algorithm**: (alpha, beta) per algorithm over its world sizes, with gamma taken
  from the joint fit (a single algorithm cannot separate beta from gamma).

Both minimise ``sum(log(model/t)^2)`` (least squares in log parameters): symmetric in
over- and under-prediction, the maximum-likelihood fit under multiplicative noise. (A
relative-error fit ``sum((model/t - 1)^2)`` bounds the cost of under-predicting a slow,
noisy point by 1 and so hugs the lower envelope of scheduling spikes; on the shared
development machine it under-predicted the median by ~40%.) LP is evaluated with the
chunk each measurement actually used (recorded by the bench in the sidecar's
``lp_chunk_bytes``; the optimal chunk otherwise). The per-size relative errors are the
"where do formula and measurement disagree" table.

The ``tuned`` model (:class:`TunedModel`), as NCCL's tuner does: for each collective and
size, the time of the fastest candidate algorithm, from measured per-algorithm curves
(monotone log-log interpolation, :class:`~gradsched.costmodel.interp.InterpCurve`) at the
measured world sizes, else from the fitted formulas (any world size).
:meth:`TunedModel.choose` names the algorithm it picked; the name runs with
:func:`gradsched.collectives.get_allreduce`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.costmodel.base import (
    DERIVED_FROM_ALL_REDUCE,
    CommModel,
    check_collective,
    register_model,
)
from gradsched.costmodel.domain import (
    BASIS_EXTRAPOLATED,
    BASIS_MEASURED,
    BASIS_UNKNOWN,
    DERIVED,
    CollectiveBasis,
)
from gradsched.costmodel.formulas import ALGORITHMS, FITTED_DIGITS, cost, supports
from gradsched.costmodel.interp import InterpCurve
from gradsched.errors import ConfigError, InputError
from gradsched.io import round_significant
from gradsched.traces import CommTrace

TIME_COLUMNS = ("time_s", "time_min_s")
ERROR_COLUMNS = ("network", "collective", "algorithm", "fit", "world_size", "bytes",
                 "measured_s", "model_s", "rel_err_pct")


def network_label(meta: dict[str, Any], nodes: int) -> str:
    """``loopback`` or the emulated cluster's rate (``1gbit``) of a bench trace."""
    rate = (meta.get("settings") or {}).get("cluster_rate")
    if rate:
        return str(rate)
    return "loopback" if nodes == 1 else f"{nodes}nodes"


def load_samples(paths: Sequence[str | Path], time_column: str = "time_s") -> pd.DataFrame:
    """All rows of per-algorithm comm traces, with ``network``, ``time`` (the chosen
    statistic) and ``lp_chunk_bytes`` (NaN where the sidecar does not say)."""
    if time_column not in TIME_COLUMNS:
        raise ConfigError(f"--time-column {time_column!r}: use one of {', '.join(TIME_COLUMNS)}")
    frames = []
    for path in paths:
        trace = CommTrace.load(path)
        frame = trace.frame.copy()
        if time_column not in frame.columns:
            raise InputError(f"no {time_column} column", path=path)
        chunks = trace.meta.get("lp_chunk_bytes") or {}
        frame["network"] = [network_label(trace.meta, int(n)) for n in frame["nodes"]]
        frame["time"] = frame[time_column].astype(float)
        frame["lp_chunk_bytes"] = [
            float(chunks.get(str(int(p)), {}).get(str(int(b)), math.nan))
            for p, b in zip(frame["world_size"], frame["bytes"], strict=True)]
        frame["source"] = Path(path).stem
        frame["gamma_measured"] = float(trace.meta.get("gamma_s_per_byte_measured", math.nan))
        frames.append(frame)
    if not frames:
        raise ConfigError("no comm traces given")
    return pd.concat(frames, ignore_index=True)


def predict(rows: pd.DataFrame, algorithm: str, alpha: float, beta: float,
            gamma: float) -> np.ndarray:
    """Formula times of ``rows`` (one algorithm) with the chunks the rows record."""
    out = np.empty(len(rows))
    m = rows["bytes"].to_numpy(dtype=float)
    ps = rows["world_size"].to_numpy(dtype=int)
    colls = rows["collective"].to_numpy()
    chunks = rows["lp_chunk_bytes"].to_numpy(dtype=float) if "lp_chunk_bytes" in rows else \
        np.full(len(rows), math.nan)
    if algorithm == "lp":
        for i in range(len(rows)):
            chunk = None if math.isnan(chunks[i]) else float(chunks[i])
            out[i] = cost(str(colls[i]), "lp", m[i], int(ps[i]), alpha, beta, gamma, chunk)
        return out
    for coll in np.unique(colls):
        for p in np.unique(ps):
            sel = (colls == coll) & (ps == p)
            if sel.any():
                out[sel] = cost(str(coll), algorithm, m[sel], int(p), alpha, beta, gamma)
    return out


def _lsq(resid: Any, x0: list[float]) -> tuple[np.ndarray, float]:
    """The parameters (exp of the log parameters the solver moves) of the best of three
    starts, to :data:`~gradsched.costmodel.formulas.FITTED_DIGITS` significant digits (the
    solver's precision: more digits would differ between CPUs), and the solver's cost."""
    from scipy.optimize import least_squares  # fitting only: a replay loads no scipy.optimize

    best = None
    for shift in (0.0, 2.0, -2.0):
        sol = least_squares(resid, np.asarray(x0) + shift, method="trf")
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    return round_significant(np.exp(best.x), FITTED_DIGITS), float(best.cost)


@dataclass
class FormulaFit:
    """Fitted link parameters of one network, joint and per algorithm."""

    network: str
    joint: tuple[float, float, float]
    per_algorithm: dict[str, tuple[float, float, float]]
    mape_pct: dict[str, float]  # "joint" and each algorithm: MAPE of its own fit
    time_column: str

    def to_dict(self) -> dict[str, Any]:
        def params(t: tuple[float, float, float]) -> dict[str, float]:
            return {"alpha_s": t[0], "beta_s_per_byte": t[1], "gamma_s_per_byte": t[2]}

        return {"network": self.network, "time_column": self.time_column,
                "joint": params(self.joint),
                "algorithms": {a: params(v) for a, v in sorted(self.per_algorithm.items())},
                "mape_pct": dict(sorted(self.mape_pct.items()))}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FormulaFit:
        def tup(d: dict[str, float]) -> tuple[float, float, float]:
            return (float(d["alpha_s"]), float(d["beta_s_per_byte"]),
                    float(d.get("gamma_s_per_byte", 0.0)))

        return cls(data["network"], tup(data["joint"]),
                   {a: tup(v) for a, v in data["algorithms"].items()},
                   dict(data.get("mape_pct", {})), data.get("time_column", "time_s"))


def fit_formulas(samples: pd.DataFrame, time_column: str = "time_s",
                 gamma: float | str | None = "auto") -> tuple[list[FormulaFit], pd.DataFrame]:
    """Fit every network of ``samples`` (see the module docstring): fits and the per-size
    error table (columns :data:`ERROR_COLUMNS`). ``default`` rows are not fitted (the
    library's own algorithm has no formula here) and appear in no error row.

    ``gamma``: a number fixes the reduction cost (s/byte) and only alpha, beta are fitted;
    ``"auto"`` uses the value the bench measured on the machine (sidecar
    ``gamma_s_per_byte_measured``, median over the traces) when every trace has one, else
    fits it; ``None`` / ``"fit"`` always fits it jointly."""
    if gamma == "auto":
        measured = samples.get("gamma_measured")
        gamma = (float(np.nanmedian(measured)) if measured is not None
                 and not np.isnan(measured).any() else None)
    elif gamma == "fit":
        gamma = None
    if gamma is not None and not (np.isfinite(float(gamma)) and float(gamma) >= 0):
        raise ConfigError(f"--gamma must be a number >= 0 (s/byte), auto or fit; got {gamma}")
    fixed_gamma = None if gamma is None else float(gamma)
    fits: list[FormulaFit] = []
    errors: list[pd.DataFrame] = []
    for network, net in samples.groupby("network", sort=True):
        net = net[net["algorithm"].isin(ALGORITHMS) & (net["world_size"] > 1)]
        net = net[[supports(c, a) for c, a in zip(net["collective"], net["algorithm"],
                                                   strict=True)]]
        if net.empty:
            continue
        groups = {a: g for a, g in net.groupby("algorithm", sort=True)}
        t_all = {a: g["time"].to_numpy(dtype=float) for a, g in groups.items()}

        def joint_resid(logp: np.ndarray, groups: dict[str, pd.DataFrame] = groups,
                        t_all: dict[str, np.ndarray] = t_all) -> np.ndarray:
            al, be, ga = np.exp(logp)
            return np.concatenate([np.log(predict(g, a, al, be, ga) / t_all[a])
                                   for a, g in groups.items()])

        if fixed_gamma is None:
            (al, be, ga), _ = _lsq(joint_resid, list(np.log([5e-5, 5e-10, 2e-10])))
        else:
            (al, be), _ = _lsq(lambda lp2, f=joint_resid, g=fixed_gamma: f(
                np.append(lp2, math.log(g) if g > 0 else -700.0)),
                list(np.log([5e-5, 5e-10])))
            ga = fixed_gamma
        joint = (float(al), float(be), float(ga))
        per: dict[str, tuple[float, float, float]] = {}
        mape: dict[str, float] = {}
        rows = []
        for a, g in groups.items():
            t = t_all[a]

            def resid(logp: np.ndarray, g: pd.DataFrame = g, a: str = a,
                      t: np.ndarray = t, ga: float = joint[2]) -> np.ndarray:
                return np.log(predict(g, a, float(np.exp(logp[0])),
                                      float(np.exp(logp[1])), ga) / t)

            (pa, pb), _ = _lsq(resid, [math.log(joint[0]), math.log(joint[1])])
            per[a] = (float(pa), float(pb), joint[2])
            for fit_name, params in (("per-algorithm", per[a]), ("joint", joint)):
                model = predict(g, a, *params)
                err = 100.0 * (model - t) / t
                if fit_name == "per-algorithm":
                    mape[a] = float(np.mean(np.abs(err)))
                rows.append(pd.DataFrame({
                    "network": network, "collective": g["collective"].to_numpy(),
                    "algorithm": a, "fit": fit_name, "world_size": g["world_size"].to_numpy(),
                    "bytes": g["bytes"].to_numpy(), "measured_s": t, "model_s": model,
                    "rel_err_pct": err}))
        frame = pd.concat(rows, ignore_index=True)
        mape["joint"] = float(frame.loc[frame["fit"] == "joint", "rel_err_pct"].abs().mean())
        fits.append(FormulaFit(str(network), joint, per, mape, time_column))
        errors.append(frame)
    if not fits:
        raise ConfigError("no rows of gradsched's algorithms (lp, ring, mst, rd, rhd) to fit")
    table = pd.concat(errors, ignore_index=True)[list(ERROR_COLUMNS)]
    return fits, table.sort_values(["network", "collective", "algorithm", "fit", "world_size",
                                    "bytes"], kind="stable").reset_index(drop=True)


def fits_to_json(fits: Sequence[FormulaFit], sources: Sequence[str]) -> dict[str, Any]:
    """The ``gradsched bench collectives-fit -o`` document."""
    return {"kind": "collectives-fit", "sources": sorted(sources),
            "networks": {f.network: f.to_dict() for f in fits}}


def fits_from_json(data: dict[str, Any]) -> dict[str, FormulaFit]:
    """Inverse of :func:`fits_to_json`: network -> fit."""
    if data.get("kind") != "collectives-fit":
        raise ConfigError("not a collectives-fit document (kind != 'collectives-fit')")
    return {k: FormulaFit.from_dict(v) for k, v in data["networks"].items()}


# --------------------------------------------------------------------------- tuned model


@register_model
class TunedModel(CommModel):
    """Fastest candidate algorithm per (collective, size, world size).

    ``measured[collective][world_size][algorithm]`` are interpolation curves;
    ``analytic[algorithm]`` are (alpha, beta, gamma) of the formulas. A query at a measured
    (collective, world size) uses the curves; otherwise the formulas when given; otherwise a
    collective measured only as all-reduce is derived with
    :data:`~gradsched.costmodel.base.DERIVED_FROM_ALL_REDUCE`. ``candidates`` restricts the
    choice (None: every algorithm present, ``default`` included).
    """

    kind = "tuned"

    def __init__(self, measured: dict[str, dict[int, dict[str, InterpCurve]]] | None = None,
                 analytic: dict[str, tuple[float, float, float]] | None = None,
                 candidates: Sequence[str] | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        self.measured = {c: {int(p): dict(algs) for p, algs in per.items()}
                         for c, per in (measured or {}).items()}
        for c in self.measured:
            check_collective(c)
        self.analytic = {a: tuple(map(float, v)) for a, v in (analytic or {}).items()}
        for a in self.analytic:
            if a not in ALGORITHMS:
                raise ConfigError(f"tuned model: unknown analytic algorithm {a!r}")
        if not self.measured and not self.analytic:
            raise ConfigError("tuned model: needs measured curves or analytic parameters")
        self.candidates = None if candidates is None else list(candidates)
        self.meta = dict(meta or {})

    # -- queries -----------------------------------------------------------------------
    def _allowed(self, name: str) -> bool:
        return self.candidates is None or name in self.candidates

    def _table(self, collective: str, nbytes: np.ndarray, world_size: int
               ) -> tuple[list[str], np.ndarray, float]:
        """(names, times[name, size], factor applied) of the candidates for one query."""
        p = int(world_size)
        curves = self.measured.get(collective, {}).get(p)
        factor = 1.0
        if curves is None and not self.analytic:
            curves = self.measured.get("all_reduce", {}).get(p)
            factor = DERIVED_FROM_ALL_REDUCE[collective]
        if curves is not None:
            names = [a for a in sorted(curves) if self._allowed(a)]
            if names:
                return names, np.stack([curves[a].times(nbytes) * factor for a in names]), factor
        names = [a for a in sorted(self.analytic)
                 if self._allowed(a) and supports(collective, a)]
        if not names:
            have = sorted({w for per in self.measured.values() for w in per})
            raise ConfigError(
                f"tuned model: no {collective} data at world size {p} (measured world sizes: "
                f"{', '.join(map(str, have)) or 'none'}; no analytic parameters for it)")
        return names, np.stack([cost(collective, a, nbytes, p, *self.analytic[a])
                                for a in names]), 1.0

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        check_collective(collective)
        m = np.asarray(nbytes, dtype=float)
        _, table, _ = self._table(collective, m, world_size)
        return table.min(axis=0)

    def choose(self, collective: str, nbytes: float, world_size: int) -> str:
        """The algorithm the model takes for one message size (NCCL-tuner style)."""
        check_collective(collective)
        names, table, _ = self._table(collective, np.asarray([float(nbytes)]), world_size)
        return names[int(np.argmin(table[:, 0]))]

    def choices(self, collective: str, nbytes: np.ndarray, world_size: int) -> list[str]:
        """:meth:`choose` for many sizes."""
        names, table, _ = self._table(collective, np.asarray(nbytes, dtype=float), world_size)
        return [names[i] for i in np.argmin(table, axis=0)]

    def world_size_basis(self, world_size: int) -> str:
        """Measured where curves were measured at ``world_size``; extrapolated where the
        fitted formulas answer instead; unknown otherwise."""
        held = {w for per in self.measured.values() for w in per}
        if int(world_size) in held:
            return BASIS_MEASURED
        return BASIS_EXTRAPOLATED if self.analytic else BASIS_UNKNOWN

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """Measured curves of ``collective``; derived from the all-reduce curves (no
        formulas); unknown where the fitted formulas answer."""
        check_collective(collective)
        p = int(world_size)
        if self.measured.get(collective, {}).get(p):
            return (CollectiveBasis(collective, BASIS_MEASURED),)
        if not self.analytic and self.measured.get("all_reduce", {}).get(p):
            return (CollectiveBasis(collective, DERIVED, "all_reduce"),)
        return (CollectiveBasis(collective, BASIS_UNKNOWN),)

    def world_sizes(self) -> tuple[int, ...] | None:
        if self.analytic:
            return None
        return tuple(sorted({w for per in self.measured.values() for w in per}))

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "candidates": self.candidates}
        out["measured"] = {
            c: {str(p): {a: curve.to_dict() for a, curve in sorted(algs.items())}
                for p, algs in sorted(per.items())}
            for c, per in sorted(self.measured.items())}
        out["analytic"] = {a: {"alpha_s": v[0], "beta_s_per_byte": v[1],
                               "gamma_s_per_byte": v[2]}
                           for a, v in sorted(self.analytic.items())}
        if self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TunedModel:
        measured = {c: {int(p): {a: InterpCurve.from_dict(v) for a, v in algs.items()}
                        for p, algs in per.items()}
                    for c, per in (data.get("measured") or {}).items()}
        analytic = {a: (v["alpha_s"], v["beta_s_per_byte"], v.get("gamma_s_per_byte", 0.0))
                    for a, v in (data.get("analytic") or {}).items()}
        return cls(measured, analytic, data.get("candidates"), data.get("meta"))


def build_tuned(paths: Sequence[str | Path], source: str = "both",
                fit: FormulaFit | None = None, network: str | None = None,
                candidates: Sequence[str] | None = None,
                time_column: str = "time_s") -> TunedModel:
    """A tuned model from per-algorithm comm traces of one network.

    ``source``: ``measured`` (curves only), ``analytic`` (fitted formulas only), ``both``
    (curves at measured world sizes, formulas elsewhere). Formulas come from ``fit`` or
    are fitted here (per-algorithm parameters).
    """
    if source not in ("measured", "analytic", "both"):
        raise ConfigError(f"--source {source!r}: use measured, analytic or both")
    samples = load_samples(paths, time_column)
    nets = sorted(samples["network"].unique())
    if network is None:
        if len(nets) > 1:
            raise ConfigError(f"the traces hold several networks ({', '.join(nets)}); "
                              "choose one with --network")
        network = nets[0]
    if network not in nets:
        raise ConfigError(f"--network {network!r}: the traces hold {', '.join(nets)}")
    samples = samples[samples["network"] == network]
    measured: dict[str, dict[int, dict[str, InterpCurve]]] = {}
    if source in ("measured", "both"):
        for (coll, p, alg), g in samples.groupby(["collective", "world_size", "algorithm"]):
            g = g.sort_values("bytes")
            curve, _ = InterpCurve.from_points(g["bytes"].to_numpy(dtype=float),
                                               g["time"].to_numpy(dtype=float))
            measured.setdefault(str(coll), {}).setdefault(int(p), {})[str(alg)] = curve
    analytic: dict[str, tuple[float, float, float]] = {}
    if source in ("analytic", "both"):
        if fit is None:
            fits, _ = fit_formulas(samples, time_column)
            fit = fits[0]
        analytic = dict(fit.per_algorithm)
    meta = {"network": network, "source": source, "time_column": time_column,
            "fitted_from": sorted(Path(p).stem for p in paths)}
    return TunedModel(measured, analytic, candidates, meta)
