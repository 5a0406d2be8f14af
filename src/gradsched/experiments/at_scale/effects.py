"""The effects of scale the at-scale study switches on, one row each: its physical cause, the
data it was calibrated on, the value applied, and its error on the data it was fitted on and
on data kept apart (each with the metric it is measured in, and the error of assuming no
effect where the source reports one).

Read from the effects' own outputs, nothing recomputed here:

* overlap slowdown: the committed per-generation model
  (:data:`gradsched.costmodel.overlap_slowdown.MODEL_PATH`; metric: weighted median
  ``|predicted / measured - 1|`` of overlapped kernel durations);
* stragglers: ``gradsched study stragglers``'s table (the ``fit`` row of the GPU-bound class
  that ``--stragglers auto`` applies to the at-scale traces, and its ``validation`` row on the
  eight ranks of PARAM's DLRM step; metric: predicted over observed wait of the slowest rank,
  minus one);
* per-unit synchronisation waits: ``gradsched study unit-jitter``'s table
  (:mod:`gradsched.experiments.at_scale.unit_jitter`; metric: fitted over measured
  independent per-unit jitter, minus one, the worst validation trace).

The comm model (the two-level NCCL model) is validated in its own section and not repeated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gradsched.errors import InputError

COLUMNS = ("effect", "switch", "cause", "calibrated_on", "value", "fit_error_pct",
           "validated_on", "validation_error_pct", "no_effect_validation_error_pct", "metric")


def _pct(x: object) -> float:
    try:
        value = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return round(100 * value, 1) if math.isfinite(value) else math.nan


def overlap_row(model: Mapping[str, Any]) -> dict[str, object]:
    """The overlap slowdown's row: the measured generation the at-scale GPUs use (A100; H100
    and H200 borrow it)."""
    try:
        gen = model["generations"]["A100"]
        sources = gen["sources"]
    except (KeyError, TypeError):
        raise InputError("overlap model: no A100 generation", field="generations") from None
    traces = {role: sum(int(s.get("groups", 0)) for s in sources if s.get("role") == role)
              for role in ("fit", "validation")}
    return {"effect": "overlap slowdown", "switch": "--overlap-slowdown",
            "cause": "NCCL kernels hold SMs and share HBM with compute",
            "calibrated_on": f"A100 Kineto traces ({traces['fit']} kernel groups)",
            "value": f"s = {float(gen['slowdown']):.4f} (H100, H200: borrowed)",
            "fit_error_pct": _pct(gen["fit"]["error_fitted"]),
            "validated_on": f"other A100 Kineto traces ({traces['validation']} kernel groups)",
            "validation_error_pct": _pct(gen["validation"]["error_fitted"]),
            "no_effect_validation_error_pct": _pct(gen["validation"]["error_no_effect"]),
            "metric": "weighted median |predicted/measured - 1| of overlapped kernels"}


def stragglers_row(table: pd.DataFrame) -> dict[str, object]:
    """The stragglers' row (GPU-bound class, the one ``--stragglers auto`` gives the at-scale
    traces)."""
    need = {"kind", "device_class", "cv", "error_pct", "samples", "source"}
    if not need <= set(table.columns):
        raise InputError(f"stragglers table: missing {sorted(need - set(table.columns))}")
    fit = table[(table["kind"] == "fit") & (table["device_class"] == "gpu-bound")]
    val = table[(table["kind"] == "validation") & (table["device_class"] == "gpu-bound")]
    if fit.empty or val.empty:
        raise InputError("stragglers table: no gpu-bound fit or validation row")
    f, v = fit.iloc[0], val.iloc[0]
    return {"effect": "stragglers", "switch": "--stragglers",
            "cause": "every rank waits for the slowest of P at the step's synchronisation",
            "calibrated_on": f"H200 captures ({f['samples']})",
            "value": f"cv = {float(f['cv']):.4f}", "fit_error_pct": math.nan,
            "validated_on": f"PARAM DLRM step, {v['samples']}",
            "validation_error_pct": round(float(v["error_pct"]), 1),
            "no_effect_validation_error_pct": -100.0,
            "metric": "predicted / observed wait of the slowest rank - 1"}


def unit_jitter_row(table: pd.DataFrame) -> dict[str, object]:
    """The per-unit synchronisation waits' row (``gradsched study unit-jitter``)."""
    need = {"role", "measured", "independent_cv", "fit_cv", "error_pct"}
    if not need <= set(table.columns):
        raise InputError(f"unit-jitter table: missing {sorted(need - set(table.columns))}")
    measured = table["measured"].astype(bool)
    fit = table[(table["role"] == "fit") & measured]
    val = table[(table["role"] == "validation") & measured]
    if fit.empty:
        raise InputError("unit-jitter table: no measured fit trace")
    worst = (val.loc[val["error_pct"].abs().idxmax(), "error_pct"] if len(val) else math.nan)
    return {"effect": "per-unit synchronisation waits", "switch": "--unit-jitter",
            "cause": "a unit's collective waits for the slowest rank where its "
                     "independent jitter outruns the unit's slack",
            "calibrated_on": f"H200 ProfilerStep traces ({len(fit)} with identical steps)",
            "value": f"c_u = {float(fit['fit_cv'].iloc[0]):.4f}",
            "fit_error_pct": math.nan,
            "validated_on": f"public A100/V100 Kineto traces ({len(val)} with identical steps)",
            "validation_error_pct": round(float(worst), 1),
            "no_effect_validation_error_pct": -100.0,
            "metric": "fitted / measured independent jitter - 1 (worst trace)"}


def effects_frame(overlap_model: Mapping[str, Any], stragglers: pd.DataFrame,
                  unit_jitter: pd.DataFrame) -> pd.DataFrame:
    """One row per effect (module docstring)."""
    rows = [overlap_row(overlap_model), stragglers_row(stragglers), unit_jitter_row(unit_jitter)]
    return pd.DataFrame(rows, columns=list(COLUMNS))
