"""Claim 1's counts of series where a fitted model beats one alpha-beta line, over every
series and over the K80 cluster's in-training series (report/fits.py).

Inputs are SYNTHETIC fit rows made here (never committed as measurements)."""

from __future__ import annotations

import pandas as pd

from gradsched.report.claims import render_claims
from gradsched.report.fits import fit_count_macros, fit_macros

# held-out MAPE per trace: (alpha-beta, piecewise, interp)
ROWS = {
    "bcaffe-googlenet-tmp2comm": (26.0, 26.0, 43.0),   # line beats interp, ties piecewise
    "bcaffe-googlenet-tmp8comm": (41.0, 19.0, 23.0),   # line loses to both
    "bcaffe-googlenet-tmpcomm": (32.0, 36.0, 47.0),    # line beats both
    "bcaffe-osu-allreduce8": (20.0, 3.0, 1.5),         # same cluster, a benchmark sweep
    "nccl-abci-inter-anode-2": (16.0, 2.8, 2.6),
}


def _fits() -> pd.DataFrame:
    models = ("alpha-beta", "piecewise", "interp")
    return pd.DataFrame([{"trace": t, "model": m, "heldout_mape_pct": v}
                         for t, values in ROWS.items()
                         for m, v in zip(models, values, strict=True)])


def test_counts_over_all_series_and_the_k80_ones() -> None:
    m = fit_count_macros(_fits())
    assert m["FitsPiecewiseBeatsAlphaBeta"] == "3"  # a tie is no win
    assert m["FitsInterpBeatsAlphaBeta"] == "3"
    assert m["FitsKEightNumSeries"] == "3"  # the OSU sweep is not an in-training series
    assert m["FitsKEightAlphaBetaBeatsInterp"] == "2"
    assert m["FitsKEightAlphaBetaBeatsPiecewise"] == "1"


def test_without_fits_every_count_is_na() -> None:
    assert set(fit_count_macros(None).values()) == {"n/a"}
    assert fit_macros(None)["FitsKEightAlphaBetaBeatsInterp"] == "n/a"


def test_claim_one_quotes_the_k80_exception() -> None:
    text = " ".join(render_claims(fit_macros(_fits())).split())
    assert ("on the real K80 cluster's 3 in-training series (B-Caffe's per-blob times), one "
            "alpha-beta line beats interpolation on 2 and the piecewise model on 1") in text
    assert "better than the line on 3 of them and interpolation on 3" in text
