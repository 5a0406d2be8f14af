"""The re-execution analysis: prediction errors, Kendall tau and best-vs-DDP on synthetic
measured runs (labelled synthetic)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")


from gradsched.errors import InputError
from gradsched.reexec import analysis
from gradsched.report.reexec import AnalysisOutputs, write_analysis


# ----------------------------------------------------------------------------- analysis
def _synthetic_measured() -> pd.DataFrame:
    """SYNTHETIC measured rows (for the analysis arithmetic only)."""
    rows = []
    pred = {"wfbp": 1.0, "syncsgd": 2.0, "best": 0.9, "ddp-native-25": 1.5, "ddp-native-1": 1.2}
    meas = {"wfbp": 1.1, "syncsgd": 2.2, "best": 0.99, "ddp-native-25": 1.65,
            "ddp-native-1": 1.32}
    for alg, p in pred.items():
        m = meas[alg]
        rows.append({"case": "c1", "bandwidth": "loopback", "world_size": 2, "algorithm": alg,
                     "kind": "ddp-native" if alg.startswith("ddp") else "plan",
                     "predicted_s": p, "predicted_interference_s": p * 1.1,
                     "predicted_raw_s": p / 2, "measured_s": m, "measured_p10_s": m * 0.99,
                     "measured_p90_s": m * 1.01, "compute_scale": 2.0, "load_avg": 5.0})
    rows.append({"case": "c1", "bandwidth": "loopback", "world_size": 2,
                 "algorithm": "compute-only", "kind": "control", "predicted_s": 0.5,
                 "predicted_interference_s": 0.5, "predicted_raw_s": 0.25, "measured_s": 0.5,
                 "measured_p10_s": 0.5, "measured_p90_s": 0.5, "compute_scale": 2.0,
                 "load_avg": 5.0})
    return pd.DataFrame(rows)


def test_analysis_errors_tau_and_best_vs_ddp(tmp_path):
    frame = _synthetic_measured()
    errors = analysis.plan_errors(frame)
    assert "compute-only" not in set(errors["algorithm"])
    assert np.allclose(errors["error_pct"], 100 * (1 / 1.1 - 1))
    assert np.allclose(errors["error_int_pct"], 0.0, atol=1e-9)
    stats = analysis.case_stats(frame)
    c1 = stats.loc[stats["case"] == "c1"].iloc[0]
    assert math.isclose(c1["median_abs_err_pct"], 100 * (1 - 1 / 1.1))
    assert math.isclose(c1["tau"], 1.0) and math.isclose(c1["tau_int"], 1.0)
    assert c1["best_at_least_as_fast"] and c1["best_vs_ddp25_beyond_spread"]
    assert math.isclose(c1["best_vs_ddp25_pct"], 100 * (0.99 / 1.65 - 1))
    assert set(stats["case"]) == {"c1", "all-loopback", "all"}
    assert math.isclose(c1["median_spread_pct"], 1.0)
    # order reversed -> tau = -1
    swapped = frame.copy()
    swapped["measured_s"] = 1.0 / swapped["measured_s"]
    assert math.isclose(analysis.case_stats(swapped).iloc[0]["tau"], -1.0)
    assert math.isnan(analysis.kendall(pd.Series([1.0, 1.0]), pd.Series([1.0, 2.0]))[0])
    # all 10 pairs have disjoint p10-p90 ranges (+-1 %) and are ordered right
    assert c1["n_distinguishable"] == 10 and c1["order_ok_pct"] == 100.0
    assert analysis.case_stats(swapped).iloc[0]["order_ok_pct"] == 0.0
    # pairs within the noise are not scored; a tie in the prediction counts half
    runs = pd.DataFrame({"measured_s": [1.0, 1.005, 2.0], "measured_p10_s": [0.99, 0.99, 1.9],
                         "measured_p90_s": [1.01, 1.02, 2.1]})
    assert analysis.ordered_pairs(pd.Series([2.0, 1.0, 3.0]), runs) == (2, 100.0)
    assert analysis.ordered_pairs(pd.Series([3.0, 1.0, 3.0]), runs) == (2, 75.0)
    # algorithms that ran the same plan count once in tau
    dup = pd.concat([frame, frame.iloc[[0]].assign(algorithm="mgwfbp")], ignore_index=True)
    dup["item"] = dup["algorithm"].where(dup["algorithm"] != "mgwfbp", "wfbp")
    assert len(analysis.distinct_runs(analysis.plan_errors(dup))) == 5
    measured = tmp_path / "m.csv"
    frame.to_csv(measured, index=False)
    out = write_analysis(analysis.analyze(measured), AnalysisOutputs(
        stats=tmp_path / "s.csv", table=tmp_path / "t.tex", md=tmp_path / "t.md"))
    assert (tmp_path / "t.tex").read_text().count("Kendall tau") == 2  # the two stacked halves
    assert "| Best |" in (tmp_path / "t.md").read_text()
    assert len(out) == 3
    bad = tmp_path / "bad.csv"
    frame.drop(columns=["measured_s"]).to_csv(bad, index=False)
    with pytest.raises(InputError, match="measured_s"):
        analysis.load(bad)
