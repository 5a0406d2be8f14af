r"""Claim 1's counts: on how many comm series a fitted model predicts held-out message sizes
better than one alpha-beta line, over every series and over the real K80 cluster's.

The medians (:func:`gradsched.report.macros.fit_macros`) hide where alpha-beta wins: on
B-Caffe's per-blob gradient-exchange times, measured inside training runs on the MG-WFBP
authors' K80 cluster (``traces/comm/external/bcaffe-googlenet-*``, importer ``bcaffe``),
the straight line beats interpolation on most series. The paper (Section "Cost models") and
the README quote these counts, never typed numbers.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.macro_text import NA

K80_IN_TRAINING_PREFIX = "bcaffe-googlenet-"
"""Fit-table ``trace`` names of the K80 cluster's in-training series (B-Caffe's per-blob
logs); the cluster's OSU sweeps (``bcaffe-osu-*``) are benchmark sweeps, not among them."""

KEYS = ("FitsPiecewiseBeatsAlphaBeta", "FitsInterpBeatsAlphaBeta",
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
    """The counts above as macro texts (:data:`~.macro_text.NA` without a fits table)."""
    out = dict.fromkeys(KEYS, NA)
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
