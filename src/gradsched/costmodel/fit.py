"""Fitting comm-trace series and their held-out error (the cross-world-size prediction built
on these fits: :mod:`gradsched.costmodel.crossws`).

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

from gradsched.costmodel.base import DERIVED_FROM_ALL_REDUCE, AlphaBetaModel
from gradsched.costmodel.domain import series_record
from gradsched.costmodel.formulas import FITTED_DIGITS
from gradsched.costmodel.interp import InterpCurve, InterpModel
from gradsched.costmodel.piecewise import (
    MAX_SEGMENTS,
    PiecewiseCurve,
    PiecewiseModel,
    fit_piecewise,
)
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
from gradsched.io import round_significant
from gradsched.traces.bundle import CommTrace

FIT_MODELS: tuple[str, ...] = ("alpha-beta", "piecewise", "interp")

FIT_TABLE_COLUMNS: tuple[str, ...] = (
    "trace", "collective", "backend", "world_size", "nodes", "model", "n_sizes", "min_bytes",
    "max_bytes", "train_mape_pct", "heldout_mape_pct", "heldout_max_ape_pct", "alpha_s",
    "beta_s_per_byte", "n_segments",
)

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
    from scipy.optimize import nnls  # fitting only: a replay loads no scipy.optimize

    design = np.column_stack([np.ones_like(m), m]) / t[:, None]
    scale = np.maximum(design.max(axis=0), 1e-300)
    coef, _ = nnls(design / scale, np.ones_like(t))
    alpha, beta = round_significant(coef / scale, FITTED_DIGITS)  # the same on every BLAS kernel
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
