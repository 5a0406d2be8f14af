"""The headline case under each fitted comm model kind: table and macros.

Inputs are SYNTHETIC replay results made here (never committed as measurements)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.report import headline, latex
from gradsched.report.headline import model_table, read_model_runs

# model kind -> algorithm -> iteration (s)
_TIMES = {
    "alpha-beta": {"wfbp": 4.0, "mgwfbp": 3.9, "contiguous_optimum": 3.9, "search": 3.0,
                   "best": 3.0, "oasr": 3.9},
    "piecewise": {"wfbp": 4.0, "mgwfbp": 3.2, "contiguous_optimum": 3.2, "search": 3.1,
                  "best": 3.1, "oasr": 3.2},
    "interp": {"wfbp": 4.0, "mgwfbp": 3.2, "contiguous_optimum": 3.1, "search": 3.1,
               "best": 3.1, "oasr": 3.1},
}


def _runs(tmp_path: Path) -> list[tuple[str, Path]]:
    runs = []
    for kind, times in _TIMES.items():
        path = tmp_path / f"{kind}.csv"
        pd.DataFrame({"algorithm": list(times), "world_size": 8,
                      "iteration_s": list(times.values()), "compute_s": 2.0,
                      "exposed_comm_s": 0.5, "n_collectives": 10, "n_buckets": 10,
                      "comm_busy_s": 1.0, "lower_bound_s": 2.0, "gap_to_lb_pct": 5.0,
                      "knobs": "{}", "comm_below_range_pct": 0.0,
                      "comm_above_range_pct": 0.0,
                      "world_size_basis": "measured", "compute_bound_by": "unknown",
                      "compute_spread": None}).to_csv(path, index=False)
        runs.append((kind, path))
    return runs


def test_headline_under_each_model(tmp_path: Path) -> None:
    long = read_model_runs(_runs(tmp_path))
    table = model_table(long)
    assert list(table.columns)[1:] == [f"{k}: ms (rank)" for k in _TIMES]
    m = headline.headline_model_macros(long)
    assert m["HeadlineModelAlphaBetaFastest"] == "Search"
    assert m["HeadlineModelInterpFastest"] == "Contig-opt = Search"  # a tie: both credited
    assert m["HeadlineModelAlphaBetaMgwfbpSpeedupOverWfbp"] == f"{4.0 / 3.9:.2f}"
    assert m["HeadlineModelsMgwfbpContigGapPctMax"] == f"{100 * (3.2 / 3.1 - 1):.1f}"
    assert m["HeadlineModelsMgwfbpContigGapPctMin"] == "0.0"
    assert m["HeadlineModelsFastestSpeedupOverWfbpMin"] == f"{4.0 / 3.1:.2f}"
    assert m["HeadlineModelsNum"] == "3"
    assert headline.headline_model_macros(None)["HeadlineModelPiecewiseFastest"] == "n/a"


def test_a_tie_within_float_noise_is_credited_and_ranked_as_one(tmp_path: Path) -> None:
    """Contig-opt and Search 1 ulp apart (a cost model fitted through another BLAS kernel):
    both are named, in the usual order, and share a rank, whichever of them is lower."""
    for delta in (1.0, -1.0):
        times = {"wfbp": 4.0, "mgwfbp": 3.2, "search": 3.1,
                 "contiguous_optimum": float(np.nextafter(3.1, 3.1 + delta)), "best": 3.1}
        long = pd.DataFrame({"model": "interp", "algorithm": list(times),
                             "iteration_s": list(times.values())})
        assert headline.headline_model_macros(long)["HeadlineModelInterpFastest"] == (
            "Contig-opt = Search")
        cells = model_table(long).set_index("algorithm")["interp: ms (rank)"]
        assert cells["Contig-opt"].endswith("(1)") and cells["Search"].endswith("(1)")


def test_headline_model_cli_and_bad_kind(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    fits = tmp_path / "fits.csv"
    pd.DataFrame({"trace": ["k80", "k80", "other"], "model": ["interp", "piecewise", "interp"],
                  "heldout_mape_pct": [23.5, 19.0, 99.0]}).to_csv(fits, index=False)
    out = tmp_path / "m.tex"
    args = ["report", "macros", "--fits", str(fits), "--headline-comm", "k80", "-o", str(out)]
    for kind, path in runs:
        args += ["--headline-model", kind, str(path)]
    assert main(args) == 0
    values = latex.parse_macros(out.read_text())
    assert values["HeadlineModelInterpHeldoutMapePct"] == "23.5"
    assert values["HeadlineModelPiecewiseFastest"] == "Search"
    tex, md = tmp_path / "t.tex", tmp_path / "t.md"
    assert main(["report", "headline-models", "--run", "interp", str(runs[2][1]),
                 "--tex", str(tex), "--md", str(md)]) == 0
    assert "interp: ms (rank)" in md.read_text()
    with pytest.raises(InputError, match="unknown model kind"):
        read_model_runs([("cubic", runs[0][1])])
