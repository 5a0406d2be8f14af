r"""The communication cost models fitted to the sweeps (Section "Cost models"): the fit
table and the cross-world-size table, the measured-vs-fitted curves and the held-out error
figure, and the prose macros (medians, maxima and claim 1's counts).

Claim 1's counts: on how many comm series a fitted model predicts held-out message sizes
better than one alpha-beta line, over every series and over the real K80 cluster's. The
medians hide where alpha-beta wins: on B-Caffe's per-blob gradient-exchange times, measured
inside training runs on the MG-WFBP authors' K80 cluster (``traces/comm/external/
bcaffe-googlenet-*``, importer ``bcaffe``), the straight line beats interpolation on most
series. The paper and the README quote these counts, never typed numbers.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.report.algorithms import MODEL_LABELS
from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, camel, latex_escape, number

STANDARD_MODELS = ("alpha-beta", "piecewise", "interp")


def fit_macros(fits: pd.DataFrame | None) -> dict[str, str]:
    out: dict[str, str] = {"NumCommTraces": NA, "NumFittedModels": NA,
                           **fit_count_macros(None)}
    for model in STANDARD_MODELS:
        for key in ("MedianHeldoutMape", "MaxHeldoutMape", "MaxHeldoutMapeTrace", "NumFits"):
            out[key + camel(model)] = NA
    if fits is None or fits.empty:
        return out
    out["NumCommTraces"] = str(fits["trace"].nunique())
    out["NumFittedModels"] = str(fits["model"].nunique())
    out.update(fit_count_macros(fits))
    for model, group in sorted(fits.groupby("model")):
        values = group["heldout_mape_pct"].astype(float).dropna()
        key = camel(str(model))
        out[f"MedianHeldoutMape{key}"] = number(float(values.median()) if len(values) else None)
        out[f"MaxHeldoutMape{key}"] = number(float(values.max()) if len(values) else None)
        out[f"NumFits{key}"] = str(len(values))
        if len(values):
            worst = group.loc[values.idxmax(), "trace"]
            out[f"MaxHeldoutMapeTrace{key}"] = latex_escape(Path(str(worst)).stem)
    return out


def _predicted(cross: pd.DataFrame) -> pd.DataFrame:
    """The rows of world sizes a model predicted (not its residual on a fitted sweep)."""
    return cross[cross["role"] != "fitted"] if "role" in cross else cross


def crossws_macros(cross: pd.DataFrame | None) -> dict[str, str]:
    if cross is not None:
        cross = _predicted(cross)
    if cross is None or cross.empty:
        return {"NumCrossWsPredictions": NA, "MedianCrossWsMape": NA, "MaxCrossWsMape": NA}
    values = cross["mape_pct"].astype(float).dropna()
    return {
        "NumCrossWsPredictions": str(len(values)),
        "MedianCrossWsMape": number(float(values.median()) if len(values) else None),
        "MaxCrossWsMape": number(float(values.max()) if len(values) else None),
    }


K80_IN_TRAINING_PREFIX = "bcaffe-googlenet-"
"""Fit-table ``trace`` names of the K80 cluster's in-training series (B-Caffe's per-blob
logs); the cluster's OSU sweeps (``bcaffe-osu-*``) are benchmark sweeps, not among them."""


FIT_COUNT_KEYS = ("FitsPiecewiseBeatsAlphaBeta", "FitsInterpBeatsAlphaBeta",
        "FitsKEightNumSeries", "FitsKEightAlphaBetaBeatsInterp",
        "FitsKEightAlphaBetaBeatsPiecewise")


def heldout_wide(fits: pd.DataFrame) -> pd.DataFrame:
    """One row per trace, one column per model: the held-out MAPE in percent."""
    return fits.pivot_table(index="trace", columns="model", values="heldout_mape_pct",
                            aggfunc="first")


def wins(wide: pd.DataFrame, better: str, worse: str) -> int:
    """Series on which model ``better`` has a strictly lower held-out MAPE than ``worse``
    (a series missing either model counts as no win)."""
    if better not in wide or worse not in wide:
        return 0
    return int((wide[better] < wide[worse]).sum())


def fit_count_macros(fits: pd.DataFrame | None) -> dict[str, str]:
    """The counts above as macro texts (:data:`~.latex.NA` without a fits table)."""
    out = dict.fromkeys(FIT_COUNT_KEYS, NA)
    if fits is None or fits.empty:
        return out
    wide = heldout_wide(fits)
    k80 = wide[wide.index.astype(str).str.startswith(K80_IN_TRAINING_PREFIX)]
    out["FitsPiecewiseBeatsAlphaBeta"] = str(wins(wide, "piecewise", "alpha-beta"))
    out["FitsInterpBeatsAlphaBeta"] = str(wins(wide, "interp", "alpha-beta"))
    if len(k80):
        out["FitsKEightNumSeries"] = str(len(k80))
        out["FitsKEightAlphaBetaBeatsInterp"] = str(wins(k80, "alpha-beta", "interp"))
        out["FitsKEightAlphaBetaBeatsPiecewise"] = str(wins(k80, "alpha-beta", "piecewise"))
    return out


def _stem(path: object) -> str:
    return Path(str(path)).stem


def fits_table(fits: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Held-out MAPE per comm trace (rows) and model (columns)."""
    if fits.empty:
        return pd.DataFrame(columns=["comm trace", "collective", "P [ranks]"]), "lll"
    frame = fits.copy()
    frame["trace"] = frame["trace"].map(_stem)
    keys = ["trace", "collective", "backend", "world_size", "nodes", "n_sizes"]
    wide = frame.pivot_table(index=keys, columns="model", values="heldout_mape_pct",
                             aggfunc="first", sort=True).reset_index()
    models = sorted(set(frame["model"]), key=lambda m: (
        list(MODEL_LABELS).index(m) if m in MODEL_LABELS else len(MODEL_LABELS), m))
    out = pd.DataFrame({
        "comm trace": wide["trace"],
        "collective": wide["collective"].str.replace("_", "-"),
        "backend": wide["backend"],
        "P [ranks]": wide["world_size"].astype(int).astype(str),
        "nodes": wide["nodes"].astype(int).astype(str),
        "sizes [count]": wide["n_sizes"].astype(int).astype(str),
    })
    for model in models:
        out[f"held-out MAPE {MODEL_LABELS.get(model, model)} [%]"] = wide[model].map(
            lambda v: fmt(v, 1))
    return out, "llllrr" + "r" * len(models)


def crossws_table(cross: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Cross-world-size prediction errors (world sizes not fitted on)."""
    cross = _predicted(cross)
    cols = ["series", "collective", "algorithm", "fit on P [ranks]", "predict P [ranks]",
            "nodes", "MAPE [%]", "max APE [%]"]
    if cross.empty:
        return pd.DataFrame(columns=cols), "lllllrrr"
    frame = cross.sort_values(["series", "collective", "algorithm", "predict_world_size"],
                              kind="stable")
    out = pd.DataFrame({
        "series": frame["series"].map(_stem),
        "collective": frame["collective"].str.replace("_", "-"),
        "algorithm": frame["algorithm"].astype(str),
        "fit on P [ranks]": frame["fit_world_sizes"].astype(str).str.replace(
            r"[;,]\s*", ", ", regex=True),
        "predict P [ranks]": frame["predict_world_size"].astype(int).astype(str),
        "nodes": frame["nodes"].astype(int).astype(str),
        "MAPE [%]": frame["mape_pct"].map(lambda v: fmt(v, 1)),
        "max APE [%]": frame["max_ape_pct"].map(lambda v: fmt(v, 1)),
    })
    return out.reset_index(drop=True), "lllllrrr"
