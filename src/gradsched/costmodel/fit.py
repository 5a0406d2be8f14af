"""Fitting comm-trace series, held-out error, and cross-world-size prediction error.

Fits minimise the *relative* error (times span ~5 decades):

* ``alpha-beta``: Hockney's T = alpha + beta*M by non-negative least squares on the rows
  [1, M]/t against 1, i.e. minimising sum(((alpha + beta*M_j) - t_j)/t_j)^2.
* ``piecewise``: :func:`gradsched.costmodel.piecewise.fit_piecewise`.
* ``interp``: :class:`gradsched.costmodel.interp.InterpCurve` (no free parameters).

Held-out error (:func:`cross_validate`): k-fold by message size. The smallest and largest
sizes always stay in the training set (so no fold is pure extrapolation); the interior
sizes are dealt to the folds round-robin in size order (fold j holds sizes j, j+k, ...),
so every fold samples the whole range. With fewer interior sizes than folds, the number
of folds drops to the number of interior sizes (leave-one-out) and a note says so. MAPE
is the mean of |pred - t|/t over all held-out sizes, in percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from gradsched.costmodel.base import DERIVED_FROM_ALL_REDUCE, AlphaBetaModel, CommModel
from gradsched.costmodel.domain import series_record
from gradsched.costmodel.formulas import (
    ALGORITHMS,
    AnalyticModel,
    cost,
    fit_link_parameters,
)
from gradsched.costmodel.interp import InterpCurve, InterpModel
from gradsched.costmodel.nccl.crossfit import MeasuredSweep, NCCLSettings, fit_family
from gradsched.costmodel.nccl.model import NCCLModel
from gradsched.costmodel.piecewise import (
    MAX_SEGMENTS,
    PiecewiseCurve,
    PiecewiseModel,
    fit_piecewise,
)
from gradsched.costmodel.scaling import ScaledModel, scale_times
from gradsched.costmodel.series import (
    AlphaBetaSeriesModel,
    SeriesModel,
    backend_meta,
    check_unique_series,
    select_series,
    series_points,
)
from gradsched.costmodel.wire import check_series
from gradsched.errors import ConfigError, InputError
from gradsched.traces.bundle import CommTrace

FIT_MODELS: tuple[str, ...] = ("alpha-beta", "piecewise", "interp")

FIT_TABLE_COLUMNS: tuple[str, ...] = (
    "trace", "collective", "backend", "world_size", "nodes", "model", "n_sizes", "min_bytes",
    "max_bytes", "train_mape_pct", "heldout_mape_pct", "heldout_max_ape_pct", "alpha_s",
    "beta_s_per_byte", "n_segments",
)

CROSS_TABLE_COLUMNS: tuple[str, ...] = (
    "series", "collective", "algorithm", "fit_world_sizes", "predict_world_size", "nodes",
    "role", "mape_pct", "max_ape_pct",
)
"""``role`` is ``fitted`` (the fit's residual on a sweep it was fitted on) or ``predicted``
(a world size it never saw: the cross-world-size error)."""


@dataclass(frozen=True)
class AlphaBetaCurve:
    """Hockney line of one series."""

    alpha_s: float
    beta_s_per_byte: float

    def times(self, nbytes: np.ndarray) -> np.ndarray:
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)


Curve = AlphaBetaCurve | PiecewiseCurve | InterpCurve


def fit_alpha_beta(nbytes: np.ndarray, times: np.ndarray) -> AlphaBetaCurve:
    """Relative-error least squares of T = alpha + beta*M with alpha, beta >= 0."""
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    if m.size < 1:
        raise ConfigError("alpha-beta fit needs at least one point")
    design = np.column_stack([np.ones_like(m), m]) / t[:, None]
    scale = np.maximum(design.max(axis=0), 1e-300)
    coef, _ = nnls(design / scale, np.ones_like(t))
    alpha, beta = coef / scale
    return AlphaBetaCurve(float(alpha), float(beta))


def fit_alpha_beta_model(nbytes: np.ndarray, times: np.ndarray) -> AlphaBetaModel:
    """:func:`fit_alpha_beta` as a (world-size-free) ``alpha-beta`` model of all-reduce."""
    curve = fit_alpha_beta(nbytes, times)
    return AlphaBetaModel(curve.alpha_s, curve.beta_s_per_byte)


def fit_curve(kind: str, nbytes: np.ndarray, times: np.ndarray,
              max_segments: int = MAX_SEGMENTS) -> Curve:
    """Fit one curve of ``kind`` (alpha-beta, piecewise, interp) to sorted points."""
    if kind == "alpha-beta":
        return fit_alpha_beta(nbytes, times)
    if kind == "piecewise":
        return fit_piecewise(nbytes, times, max_segments=max_segments)
    if kind == "interp":
        return InterpCurve.from_points(nbytes, times)[0]
    raise ConfigError(f"unknown fit model {kind!r}; use one of {', '.join(FIT_MODELS)} or all")


def ape_pct(pred: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Absolute percentage errors 100*|pred - actual|/actual."""
    return 100.0 * np.abs(np.asarray(pred) - actual) / actual


def fold_indices(n: int, folds: int) -> tuple[list[np.ndarray], str | None]:
    """Held-out index sets (see the module docstring) and a note when folds were reduced."""
    if folds < 2:
        raise ConfigError(f"--folds must be >= 2, got {folds}")
    interior = np.arange(1, n - 1)
    if interior.size == 0:
        return [], f"only {n} sizes: no interior size to hold out, held-out error not computed"
    used = min(folds, int(interior.size))
    note = None
    if used < folds:
        note = (f"only {n} sizes ({interior.size} interior): {used} folds instead of {folds} "
                "(leave-one-out over interior sizes)")
    return [interior[j::used] for j in range(used)], note


@dataclass
class CVResult:
    """Held-out absolute percentage errors of one series and model."""

    heldout_ape: np.ndarray
    folds: int
    note: str | None


def cross_validate(kind: str, nbytes: np.ndarray, times: np.ndarray, folds: int = 5
                   ) -> CVResult:
    """k-fold held-out APEs by message size (endpoints always trained on)."""
    sets, note = fold_indices(nbytes.size, folds)
    apes = []
    for held in sets:
        train = np.setdiff1d(np.arange(nbytes.size), held)
        curve = fit_curve(kind, nbytes[train], times[train])
        apes.append(ape_pct(curve.times(nbytes[held]), times[held]))
    return CVResult(np.concatenate(apes) if apes else np.empty(0), len(sets), note)


@dataclass
class SeriesFit:
    """One fitted (file, series, model) with its errors: one row of the fit table."""

    trace: str
    info: dict[str, Any]
    model: str
    curve: Curve
    nbytes: np.ndarray
    times: np.ndarray
    train_mape_pct: float
    heldout_mape_pct: float
    heldout_max_ape_pct: float
    folds: int
    notes: list[str] = field(default_factory=list)

    @property
    def alpha_s(self) -> float:
        if isinstance(self.curve, AlphaBetaCurve):
            return self.curve.alpha_s
        if isinstance(self.curve, PiecewiseCurve):
            return self.curve.alpha_s
        return math.nan

    @property
    def beta_s_per_byte(self) -> float:
        if isinstance(self.curve, AlphaBetaCurve):
            return self.curve.beta_s_per_byte
        if isinstance(self.curve, PiecewiseCurve) and self.curve.n_segments == 1:
            return self.curve.slopes_s_per_byte[0]
        return math.nan

    @property
    def n_segments(self) -> float:
        if isinstance(self.curve, AlphaBetaCurve):
            return 1
        if isinstance(self.curve, PiecewiseCurve):
            return self.curve.n_segments
        return math.nan

    def row(self) -> dict[str, Any]:
        return {
            "trace": self.trace, "collective": self.info["collective"],
            "backend": self.info["backend"], "world_size": int(self.info["world_size"]),
            "nodes": int(self.info["nodes"]), "model": self.model,
            "n_sizes": int(self.nbytes.size), "min_bytes": int(self.nbytes[0]),
            "max_bytes": int(self.nbytes[-1]), "train_mape_pct": self.train_mape_pct,
            "heldout_mape_pct": self.heldout_mape_pct,
            "heldout_max_ape_pct": self.heldout_max_ape_pct, "alpha_s": self.alpha_s,
            "beta_s_per_byte": self.beta_s_per_byte, "n_segments": self.n_segments,
        }

    def describe_params(self) -> str:
        """Fitted parameters for humans (seconds, bytes)."""
        c = self.curve
        if isinstance(c, AlphaBetaCurve):
            bw = 1.0 / c.beta_s_per_byte / 1e9 if c.beta_s_per_byte > 0 else math.inf
            return f"alpha={c.alpha_s * 1e6:.3f}us beta={c.beta_s_per_byte:.4g}s/B ({bw:.3g} GB/s)"
        if isinstance(c, PiecewiseCurve):
            bps = ",".join(f"{b:.0f}" for b in c.breakpoints_bytes) or "-"
            slopes = ",".join(f"{s:.3g}" for s in c.slopes_s_per_byte)
            return (f"segments={c.n_segments} alpha={c.alpha_s * 1e6:.3f}us "
                    f"breakpoints_bytes=[{bps}] slopes_s_per_byte=[{slopes}]")
        return f"points={len(c.bytes_)} (monotone log-log PCHIP)"


def noise_notes(nbytes: np.ndarray, times: np.ndarray) -> list[str]:
    """Warnings about a noisy series: times that fall as the size grows."""
    drops = np.flatnonzero(np.diff(times) < 0)
    big = np.flatnonzero(np.diff(times) / times[:-1] < -0.10)
    notes = []
    if big.size:
        where = ", ".join(str(int(nbytes[i + 1])) for i in big[:5])
        notes.append(f"noisy series: time falls by >10% at {big.size} of {nbytes.size} sizes "
                     f"(bytes {where}{'...' if big.size > 5 else ''}); the interp model pools "
                     "them (isotonic) and the fits average them out")
    elif drops.size > max(2, nbytes.size // 5):
        notes.append(f"time decreases with size at {drops.size} of {nbytes.size} sizes "
                     "(measurement noise)")
    return notes


def wire_note(info: dict[str, Any], nbytes: np.ndarray, times: np.ndarray) -> str | None:
    """The warning about points faster than the wire (:func:`~.wire.check_series`)."""
    collective, world_size = str(info["collective"]), int(info["world_size"])
    if world_size <= 1:
        return None
    check = check_series(nbytes, times, world_size, DERIVED_FROM_ALL_REDUCE[collective],
                         info.get("line_rate_Bps"))
    return check.note(collective, world_size)


def fit_series(trace_name: str, info: dict[str, Any], rows: pd.DataFrame, kind: str,
               folds: int = 5) -> SeriesFit:
    """Fit one series with one model and compute its training and held-out errors."""
    m, t = series_points(rows)
    curve = fit_curve(kind, m, t)
    train = ape_pct(curve.times(m), t)
    cv = cross_validate(kind, m, t, folds)
    notes = noise_notes(m, t)
    wire = wire_note(info, m, t)
    if wire:
        notes.append(wire)
    if cv.note:
        notes.append(cv.note)
    held = cv.heldout_ape
    train_mape = float(train.mean())
    if held.size and held.mean() > 20.0 and held.mean() > 2.0 * train_mape:
        notes.append(f"{kind}: held-out MAPE {held.mean():.1f}% is more than twice the "
                     f"training MAPE {train_mape:.1f}%: the series is too noisy (or too short) "
                     "for this model to predict unmeasured sizes reliably")
    return SeriesFit(
        trace=trace_name, info=info, model=kind, curve=curve, nbytes=m, times=t,
        train_mape_pct=train_mape,
        heldout_mape_pct=float(held.mean()) if held.size else math.nan,
        heldout_max_ape_pct=float(held.max()) if held.size else math.nan,
        folds=cv.folds, notes=notes,
    )


def load_trace_series(path: str | Path, in_place: bool = False
                      ) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Series of a comm-trace file (validated by :class:`CommTrace`); each series' info
    carries the sidecar's ``line_rate_Bps`` where the measured network's is known."""
    trace = CommTrace.load(path)
    series = select_series(trace.frame, in_place=in_place)
    rate = trace.meta.get("line_rate_Bps")
    if rate is not None:
        for info, _ in series:
            info["line_rate_Bps"] = float(rate)
    return series


def fit_file(path: str | Path, kinds: list[str], folds: int = 5, in_place: bool = False
             ) -> list[SeriesFit]:
    """Every series of ``path`` with every model in ``kinds``."""
    name = Path(path).stem
    out = []
    for info, rows in load_trace_series(path, in_place):
        for kind in kinds:
            try:
                out.append(fit_series(name, info, rows, kind, folds))
            except InputError as exc:
                raise InputError(f"{info['collective']} at world size {info['world_size']}: "
                                 f"{exc.reason}", path=path) from None
    return out


def heldout_meta(fits: list[SeriesFit]) -> dict[str, dict[str, float]]:
    """The model's own error, for its users (``gradsched advise``): per collective, the
    largest held-out MAPE over its world sizes (``heldout_mape_pct``) and the largest
    held-out APE (``heldout_max_ape_pct``), in percent; series without a held-out error
    are left out (an empty dict where none has one)."""
    out: dict[str, dict[str, float]] = {}
    for key, attr in (("heldout_mape_pct", "heldout_mape_pct"),
                      ("heldout_max_ape_pct", "heldout_max_ape_pct")):
        per: dict[str, float] = {}
        for fit in fits:
            value = float(getattr(fit, attr))
            if math.isfinite(value):
                name = str(fit.info["collective"])
                per[name] = max(per.get(name, 0.0), round(value, 6))
        if per:
            out[key] = dict(sorted(per.items()))
    return out


def build_model(kind: str, fits: list[SeriesFit]) -> SeriesModel:
    """A serialisable multi-series model of ``kind`` from fits of that kind."""
    chosen = [f for f in fits if f.model == kind]
    check_unique_series([f.info for f in chosen], ", ".join(sorted({f.trace for f in chosen})))
    sources = sorted({f.trace for f in chosen})
    meta: dict[str, Any] = {"fitted_from": sources}
    meta.update(backend_meta(f.info for f in chosen))
    rates = [f.info["line_rate_Bps"] for f in chosen if f.info.get("line_rate_Bps")]
    if rates:
        meta["line_rate_Bps"] = min(rates)
    meta.update(heldout_meta(chosen))
    meta["domain"] = [series_record(f.info, f.nbytes) for f in chosen]
    if kind == "alpha-beta":
        curves: dict[tuple[str, int], Any] = {
            (f.info["collective"], f.info["world_size"]):
                (f.curve.alpha_s, f.curve.beta_s_per_byte)  # type: ignore[union-attr]
            for f in chosen
        }
        return AlphaBetaSeriesModel(curves, meta)
    curves = {(f.info["collective"], f.info["world_size"]): f.curve for f in chosen}
    cls = PiecewiseModel if kind == "piecewise" else InterpModel
    return cls(curves, meta)


def fit_table(fits: list[SeriesFit]) -> pd.DataFrame:
    """The fit table (columns :data:`FIT_TABLE_COLUMNS`), in a deterministic order."""
    frame = pd.DataFrame([f.row() for f in fits], columns=list(FIT_TABLE_COLUMNS))
    return frame.sort_values(["trace", "collective", "backend", "world_size", "nodes", "model"],
                             kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- cross world size


def series_name(stems: list[str]) -> str:
    """A name for a family of files: their common prefix without trailing digits/separators."""
    if not stems:
        return ""
    first, last = min(stems), max(stems)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    prefix = first[:n]
    name = prefix.rstrip("0123456789-_.x")
    return name or "-".join(sorted(stems))


@dataclass
class CrossFit:
    """The analytic model derived at the fit world sizes of one (collective, backend) family."""

    series: str
    collective: str
    backend: str
    algorithm: str
    fit_world_sizes: list[int]
    model: AnalyticModel | NCCLModel
    rows: list[dict[str, Any]]
    scaled: CommModel | None = None  # method "scaled" with P = world size: the predictor
    notes: list[str] = field(default_factory=list)

    def predictor(self) -> CommModel:
        """The model ``-o`` writes: the scaled model, or the analytic / nccl model."""
        return self.scaled or self.model


def _check_cross_options(method: str, algorithm: str, source: str, scale_by: str,
                         fit_on: list[int]) -> None:
    if method not in ("analytic", "scaled"):
        raise ConfigError(f"--method {method!r}: use nccl, analytic or scaled")
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"--algorithm {algorithm!r}: choose one of {', '.join(ALGORITHMS)}")
    if source not in ("piecewise", "alpha-beta"):
        raise ConfigError(f"--from {source!r}: use piecewise or alpha-beta")
    if scale_by not in ("world_size", "nodes"):
        raise ConfigError(f"--scale-by {scale_by!r}: use world_size or nodes")
    if not fit_on:
        raise ConfigError("--fit-on needs at least one world size")


_Series = tuple[dict[str, Any], np.ndarray, np.ndarray]  # (info, sizes, times)


def _series_by_world_size(paths: list[str | Path], in_place: bool
                          ) -> dict[tuple[str, str], dict[int, _Series]]:
    """(collective, backend) -> world size -> its series; a repeated one is an error."""
    groups: dict[tuple[str, str], dict[int, _Series]] = {}
    for path in paths:
        for info, rows in load_trace_series(path, in_place):
            m, t = series_points(rows)
            key = (str(info["collective"]), str(info["backend"]))
            ws = int(info["world_size"])
            if ws in groups.setdefault(key, {}):
                raise InputError(f"{key[0]} ({key[1]}) at world size {ws} appears twice among "
                                 "the inputs", path=path)
            groups[key][ws] = (info, m, t)
    return groups


def _fit_link(collective: str, backend: str, by_ws: dict[int, _Series], fit_on: list[int],
              algorithm: str, source: str, gamma: float, scale_by: str
              ) -> tuple[float, float, dict[int, Curve]]:
    """(alpha, beta) from the fit world sizes' curves, and those curves by P."""
    missing = [w for w in fit_on if w not in by_ws]
    if missing:
        raise ConfigError(
            f"--fit-on {','.join(map(str, fit_on))}: {collective} ({backend}) has no series at "
            f"world size {','.join(map(str, missing))}; it has "
            f"{', '.join(map(str, sorted(by_ws)))}")
    samples = []
    base_curves: dict[int, Curve] = {}
    for ws in fit_on:
        info, m, t = by_ws[ws]
        curve = fit_curve(source, m, t)
        base_curves[int(info[scale_by])] = curve
        p = int(info[scale_by])
        if p < 2:
            raise ConfigError(f"cannot derive per-hop parameters at {scale_by}={p} "
                              f"(world size {ws}); use --scale-by world_size")
        samples.append((p, m, curve.times(m)))
    alpha, beta = fit_link_parameters(collective, algorithm, samples, gamma)
    return alpha, beta, base_curves


def _cross_rows(name: str, collective: str, by_ws: dict[int, _Series], fit_on: list[int],
                algorithm: str, alpha: float, beta: float, gamma: float, scale_by: str,
                method: str, base_curves: dict[int, Curve]) -> list[dict[str, Any]]:
    """One row per world size: the fit's residual where it was fitted on (``role`` fitted),
    the prediction's errors elsewhere."""
    rows = []
    for ws, (info, m, t) in sorted(by_ws.items()):
        p = int(info[scale_by])
        pred = cost(collective, algorithm, m, p, alpha, beta, gamma)
        if method == "scaled":
            ref = min(base_curves, key=lambda w: (abs(math.log2(w) - math.log2(p)), w))
            pred = scale_times(base_curves[ref].times(m), pred,
                               cost(collective, algorithm, m, ref, alpha, beta, gamma),
                               p > ref)
        ape = ape_pct(pred, t)
        rows.append({
            "series": name, "collective": collective,
            "algorithm": algorithm if method == "analytic" else f"scaled:{algorithm}",
            "fit_world_sizes": ";".join(map(str, fit_on)), "predict_world_size": ws,
            "nodes": int(info["nodes"]), "role": "fitted" if ws in fit_on else "predicted",
            "mape_pct": float(ape.mean()), "max_ape_pct": float(ape.max()),
        })
    return rows


def extrapolation_meta(rows: list[dict[str, Any]], fit_on: list[int]) -> dict[str, Any]:
    """The ``"extrapolation"`` metadata of a cross-world-size model: the world sizes fitted
    and validated, the median over validated world sizes of their MAPE and the worst one
    (percent; ``None`` when no world size was validated)."""
    predicted = [r for r in rows if r["role"] == "predicted"]
    mapes = [float(r["mape_pct"]) for r in predicted]
    return {
        "fit_world_sizes": sorted(int(w) for w in fit_on),
        "validated_world_sizes": sorted(int(r["predict_world_size"]) for r in predicted),
        "median_ape_pct": round(float(np.median(mapes)), 6) if mapes else None,
        "max_ape_pct": round(float(np.max(mapes)), 6) if mapes else None,
    }


def _scaled_predictor(collective: str, source: str, base_curves: dict[int, Curve],
                      model: AnalyticModel, domain: list[dict[str, Any]],
                      extrapolation: dict[str, Any]) -> ScaledModel:
    """The ``scaled`` method's predictor: the base fits shifted by the formula; ``domain``
    records the sizes each base series measured (:mod:`.domain`); ``extrapolation`` is the
    measured cross-world-size error (:func:`extrapolation_meta`), kept in the base's and the
    formula's metadata."""
    meta: dict[str, Any] = {"domain": domain, "extrapolation": extrapolation}
    if source == "alpha-beta":
        base: SeriesModel = AlphaBetaSeriesModel(
            {(collective, w): (c.alpha_s, c.beta_s_per_byte)  # type: ignore[union-attr]
             for w, c in base_curves.items()}, meta)
    else:
        base = PiecewiseModel({(collective, w): c for w, c in base_curves.items()}, meta)
    return ScaledModel(base, model)


def cross_world_size(
    paths: list[str | Path],
    fit_on: list[int],
    algorithm: str = "ring",
    source: str = "piecewise",
    gamma: float = 0.0,
    scale_by: str = "world_size",
    in_place: bool = False,
    method: str = "analytic",
    nccl: NCCLSettings | None = None,
) -> list[CrossFit]:
    """Derive per-hop alpha / link beta at ``fit_on`` world sizes, predict the others.

    For each (collective, backend) present in the files: each fit world size's series is
    fitted with ``source`` (piecewise or alpha-beta); the fitted curve evaluated at the
    measured sizes is inverted through ``algorithm``'s formula (least squares in relative
    error, :func:`~gradsched.costmodel.formulas.fit_link_parameters`; an exact inversion
    for one alpha-beta fit) into (alpha, beta); the resulting analytic model predicts the
    series at every other world size. ``scale_by="nodes"`` uses the node count as P
    (hierarchical view: the inter-node ring sets the cost).

    ``method="scaled"`` predicts with :class:`~gradsched.costmodel.scaling.ScaledModel`
    instead: the ``source`` fit at the nearest fit world size, shifted (or, below it,
    scaled) by the formula (:mod:`gradsched.costmodel.scaling`); its rows carry
    ``algorithm`` = ``scaled:<algorithm>``.

    ``method="nccl"`` fits the two-level NCCL model instead (:func:`cross_nccl`; ``nccl``
    holds its settings). Every result lists a row per world size: ``role`` fitted (the
    residual on a fitted sweep) or predicted; the model's metadata carries
    :func:`extrapolation_meta` under ``"extrapolation"``.
    """
    if method == "nccl":
        return cross_nccl(paths, fit_on, nccl or NCCLSettings(), in_place)
    _check_cross_options(method, algorithm, source, scale_by, fit_on)
    stems = [Path(p).stem for p in paths]
    name = series_name(stems)
    out = []
    for (collective, backend), by_ws in sorted(_series_by_world_size(paths, in_place).items()):
        alpha, beta, base_curves = _fit_link(collective, backend, by_ws, fit_on, algorithm,
                                             source, gamma, scale_by)
        domain = [series_record(by_ws[w][0], by_ws[w][1]) for w in fit_on]
        model = AnalyticModel(alpha, beta, gamma, algorithm,
                              meta={"fitted_from": sorted(stems), "fit_world_sizes": fit_on,
                                    "scale_by": scale_by, "source_fit": source,
                                    "domain": domain})
        rows = _cross_rows(name, collective, by_ws, fit_on, algorithm, alpha, beta, gamma,
                           scale_by, method, base_curves)
        extrapolation = extrapolation_meta(rows, fit_on)
        model.meta["extrapolation"] = extrapolation
        scaled = None
        if method == "scaled" and scale_by == "world_size":
            scaled = _scaled_predictor(collective, source, base_curves, model, domain,
                                       extrapolation)
        out.append(CrossFit(name, collective, backend, algorithm, list(fit_on), model, rows,
                            scaled))
    return out


def cross_nccl(paths: list[str | Path], fit_on: list[int], settings: NCCLSettings,
               in_place: bool = False) -> list[CrossFit]:
    """``--method nccl``: per (collective, backend) of the files, the ``nccl`` model fitted
    on the ``fit_on`` sweeps (:func:`gradsched.costmodel.nccl.crossfit.fit_family`), with a
    row per world size and ``"extrapolation"`` in its metadata. Only NCCL sweeps."""
    if not fit_on:
        raise ConfigError("--fit-on needs at least one world size")
    name = series_name([Path(p).stem for p in paths])
    groups: dict[tuple[str, str], dict[int, MeasuredSweep]] = {}
    for path in paths:
        trace = CommTrace.load(path)
        for info, rows in select_series(trace.frame, in_place=in_place):
            key = (str(info["collective"]), str(info["backend"]))
            if key[1] != "nccl":
                raise ConfigError(f"{path}: {key[0]} ran on {key[1]}, not NCCL: the nccl "
                                  "model does not apply (use --method analytic or scaled)")
            ws = int(info["world_size"])
            if ws in groups.setdefault(key, {}):
                raise InputError(f"{key[0]} ({key[1]}) at world size {ws} appears twice among "
                                 "the inputs", path=path)
            m, t = series_points(rows)
            groups[key][ws] = MeasuredSweep(info, m, t, dict(trace.meta), str(path))
    out = []
    for (collective, backend), by_ws in sorted(groups.items()):
        model, rows, notes = fit_family(name, collective, by_ws, sorted(fit_on), settings)
        model.meta["extrapolation"] = extrapolation_meta(rows, fit_on)
        out.append(CrossFit(name, collective, backend, "nccl", sorted(fit_on), model, rows,
                            None, notes))
    return out


def cross_table(results: list[CrossFit]) -> pd.DataFrame:
    """The cross-world-size table (columns :data:`CROSS_TABLE_COLUMNS`)."""
    rows = [r for res in results for r in res.rows]
    frame = pd.DataFrame(rows, columns=list(CROSS_TABLE_COLUMNS))
    frame["mape_pct"] = frame["mape_pct"].astype(float).round(6)
    frame["max_ape_pct"] = frame["max_ape_pct"].astype(float).round(6)
    return frame.sort_values(["series", "collective", "algorithm", "predict_world_size"],
                             kind="stable").reset_index(drop=True)
