"""Cross-world-size prediction: the collectives of the world sizes a model was not fitted on.

A family of sweeps of one network (one file per world size) is fitted at the world sizes
``fit_on`` and predicts the others (leave-world-sizes-out), with one of three methods:

* ``analytic``: per-hop alpha and per-link beta of one algorithm's formula
  (:mod:`gradsched.costmodel.formulas`), derived from the fitted curves;
* ``scaled``: the fitted curve at the nearest fitted world size, shifted (or scaled) by that
  formula (:mod:`gradsched.costmodel.scaling`);
* ``nccl``: the two-level NCCL model (:mod:`gradsched.costmodel.nccl`), calibrated on the
  smallest measured scale.

Every result carries one table row per world size (``role`` fitted: the residual on a sweep
the model saw; predicted: the error where it did not) and writes that error into the model's
metadata (``"extrapolation"``) so that every command can size its band at a world size
nobody measured. The per-series fits it builds on are :mod:`gradsched.costmodel.fit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain import series_record
from gradsched.costmodel.fit import Curve, ape_pct, fit_curve, load_trace_series
from gradsched.costmodel.formulas import ALGORITHMS, AnalyticModel, cost, fit_link_parameters
from gradsched.costmodel.nccl.crossfit import MeasuredSweep, NCCLSettings, fit_family
from gradsched.costmodel.nccl.model import NCCLModel
from gradsched.costmodel.piecewise import PiecewiseModel
from gradsched.costmodel.scaling import ScaledModel, scale_times
from gradsched.costmodel.series import (
    AlphaBetaSeriesModel,
    SeriesModel,
    select_series,
    series_points,
)
from gradsched.errors import ConfigError, InputError
from gradsched.traces.bundle import CommTrace

CROSS_TABLE_COLUMNS: tuple[str, ...] = (
    "series", "collective", "algorithm", "fit_world_sizes", "predict_world_size", "nodes",
    "role", "mape_pct", "max_ape_pct",
)
"""``role`` is ``fitted`` (the fit's residual on a sweep it was fitted on) or ``predicted``
(a world size it never saw: the cross-world-size error)."""



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


@dataclass(frozen=True)
class CrossSettings:
    """The settings of one cross-world-size check (:func:`cross_world_size` says what each
    does), checked once when built: the world sizes ``fit_on`` to fit at, the ``method``
    (analytic, scaled or nccl), the ``algorithm`` whose formula carries the fit, the
    per-series fit ``source`` (piecewise or alpha-beta), the formula's ``gamma``, what P
    counts (``scale_by``: world_size or nodes), whether the in-place series are read, and
    ``nccl``'s settings (method nccl only)."""

    fit_on: tuple[int, ...]
    algorithm: str = "ring"
    source: str = "piecewise"
    gamma: float = 0.0
    scale_by: str = "world_size"
    in_place: bool = False
    method: str = "analytic"
    nccl: NCCLSettings | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fit_on", tuple(self.fit_on))
        if self.method != "nccl":
            if self.method not in ("analytic", "scaled"):
                raise ConfigError(f"--method {self.method!r}: use nccl, analytic or scaled")
            if self.algorithm not in ALGORITHMS:
                raise ConfigError(f"--algorithm {self.algorithm!r}: choose one of "
                                  f"{', '.join(ALGORITHMS)}")
            if self.source not in ("piecewise", "alpha-beta"):
                raise ConfigError(f"--from {self.source!r}: use piecewise or alpha-beta")
            if self.scale_by not in ("world_size", "nodes"):
                raise ConfigError(f"--scale-by {self.scale_by!r}: use world_size or nodes")
        if not self.fit_on:
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


def _fit_link(collective: str, backend: str, by_ws: dict[int, _Series],
              settings: CrossSettings) -> tuple[float, float, dict[int, Curve]]:
    """(alpha, beta) from the fit world sizes' curves, and those curves by P."""
    fit_on, source, scale_by = settings.fit_on, settings.source, settings.scale_by
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
    alpha, beta = fit_link_parameters(collective, settings.algorithm, samples, settings.gamma)
    return alpha, beta, base_curves


def _cross_rows(name: str, collective: str, by_ws: dict[int, _Series], settings: CrossSettings,
                link: tuple[float, float], base_curves: dict[int, Curve]
                ) -> list[dict[str, Any]]:
    """One row per world size: the fit's residual where it was fitted on (``role`` fitted),
    the prediction's errors elsewhere; ``link``: the fitted (alpha, beta)."""
    fit_on, algorithm, gamma = settings.fit_on, settings.algorithm, settings.gamma
    scale_by, method = settings.scale_by, settings.method
    alpha, beta = link
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


def cross_world_size(paths: list[str | Path], settings: CrossSettings) -> list[CrossFit]:
    """Derive per-hop alpha / link beta at ``settings.fit_on`` world sizes, predict the
    others (the names below are ``settings``' fields).

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
    fit_on, algorithm, source, in_place = (list(settings.fit_on), settings.algorithm,
                                           settings.source, settings.in_place)
    if settings.method == "nccl":
        return cross_nccl(paths, fit_on, settings.nccl or NCCLSettings(), in_place)
    gamma, scale_by = settings.gamma, settings.scale_by
    stems = [Path(p).stem for p in paths]
    name = series_name(stems)
    out = []
    for (collective, backend), by_ws in sorted(_series_by_world_size(paths, in_place).items()):
        alpha, beta, base_curves = _fit_link(collective, backend, by_ws, settings)
        domain = [series_record(by_ws[w][0], by_ws[w][1]) for w in fit_on]
        model = AnalyticModel(alpha, beta, gamma, algorithm,
                              meta={"fitted_from": sorted(stems), "fit_world_sizes": fit_on,
                                    "scale_by": scale_by, "source_fit": source,
                                    "domain": domain})
        rows = _cross_rows(name, collective, by_ws, settings, (alpha, beta), base_curves)
        extrapolation = extrapolation_meta(rows, fit_on)
        model.meta["extrapolation"] = extrapolation
        scaled = None
        if settings.method == "scaled" and scale_by == "world_size":
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
