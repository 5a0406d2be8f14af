"""The re-execution report: the summary table's rows and intervals, and its LaTeX is two
stacked tables."""

from __future__ import annotations

import pandas as pd
import pytest

from gradsched.report.reexec import split_latex


def test_reexec_latex_is_two_stacked_tables() -> None:
    table = pd.DataFrame([["wfbp", "1.0", "2.0", "3.0", "4.0"]],
                         columns=["plan", "A err %", "A err % (int.)", "B err %",
                                  "B err % (int.)"])
    tex = split_latex(table, "t")
    assert tex.count(r"\begin{tabular}{lrr}") == 2
    assert "(int.)" not in tex and "without" in tex and "with interference" in tex


def test_summary_table_rows_and_intervals():
    from gradsched.report.reexec import reexec_summary_table

    stats = pd.DataFrame([{
        "case": "resnet50-b2-p2-tbf1gbit", "world_size": 2, "bandwidth": "tbf1gbit",
        "spread_to_noise": 12.34, "tau_int": 0.81, "tau_int_lo": 0.6, "tau_int_hi": 0.9,
        "n_separated_pairs": 30, "n_pairs": 45, "tau_separated": 0.93,
        "median_abs_err_int_pct": 3.21, "median_abs_err_raw_pct": 9.87,
        "best_vs_ddp_default_speedup": 1.12,
        "best_vs_ddp_default_speedup_lo": 1.08, "best_vs_ddp_default_speedup_hi": 1.15,
        "best_vs_ddp_tuned_speedup": 1.01, "best_vs_ddp_tuned_speedup_lo": 0.98,
        "best_vs_ddp_tuned_speedup_hi": 1.04, "tuned_ddp": "ddp-native-5",
        "n_flagged_runs": 0}, {"case": "all", "world_size": "2", "bandwidth": "x"}])
    table, align = reexec_summary_table(stats)
    assert len(table) == 1 and len(align) == len(table.columns)
    row = table.iloc[0].tolist()
    assert row[:2] == ["ResNet-50 b2, P=2, 1 Gbit/s", "12.3"]
    assert row[2] == "0.81 [0.60, 0.90]" and row[3] == "30/45"
    assert row[5] == "3.2" and row[6] == "9.9"  # calibrated, and uncalibrated beside it
    assert row[7] == "1.12 [1.08, 1.15]" and row[8] == "1.01 [0.98, 1.04] (5 MB)"


def _measured_rows() -> pd.DataFrame:
    """SYNTHETIC measured rows of two cases whose times differ tenfold (made here)."""
    rows = []
    for case, scale in (("resnet18-b4-p2-tbf1gbit", 1.0), ("resnet50-b2-p2-tbf1gbit", 10.0)):
        for alg, kind, pred, meas in (("ddp-native-default", "ddp-native", 0.30, 0.32),
                                      ("wfbp", "plan", 0.36, 0.35),
                                      ("best", "plan", 0.27, 0.30)):
            rows.append({"case": case, "algorithm": alg, "kind": kind, "world_size": 2,
                         "bandwidth": "tbf1gbit", "predicted_s": pred * scale,
                         "predicted_interference_s": pred * scale,
                         "measured_s": meas * scale, "measured_p10_s": meas * scale * 0.95,
                         "measured_p90_s": meas * scale * 1.05})
    return pd.DataFrame(rows)


def test_reexec_figure_puts_each_case_relative_to_its_ddp_default(tmp_path) -> None:
    """Claim 5 is about the order within a case: every case is scaled to its own PyTorch
    DDP default (so the two cases, ten times apart in seconds, share one scale), one panel
    each."""
    from gradsched.report.reexec import figure_reexec, within_case_rows

    rel = within_case_rows(_measured_rows(), None)
    default = rel.loc[rel["algorithm"] == "ddp-native-default"]
    assert default["predicted_rel"].tolist() == [1.0, 1.0]
    assert default["measured_rel"].tolist() == [1.0, 1.0]
    wfbp = rel.loc[rel["algorithm"] == "wfbp", "measured_rel"].to_numpy()
    assert wfbp[0] == pytest.approx(wfbp[1]) and wfbp[0] == pytest.approx(0.35 / 0.32)
    figure_reexec(_measured_rows(), tmp_path / "r.pdf", tmp_path / "r.png")
    assert (tmp_path / "r.pdf").stat().st_size > 0


def test_the_error_above_the_control_beside_the_uncalibrated_one():
    """SYNTHETIC (made up): one case, a control at 1.0 s predicted and measured; a plan
    predicted 1.2 s (0.2 above its control) measured 1.4 s (0.4 above): -50 % above the
    control though only -14 % on the whole step."""
    from gradsched.report.reexec import plain_replay_macros

    base = {"case": "c", "world_size": 2, "bandwidth": "tbf1gbit", "compute_scale": 1.0}
    frame = pd.DataFrame([
        base | {"algorithm": "compute-only", "kind": "control", "predicted_s": 1.0,
                "predicted_interference_s": 1.0, "predicted_raw_s": 1.1, "measured_s": 1.0},
        base | {"algorithm": "best", "kind": "plan", "predicted_s": 1.2,
                "predicted_interference_s": 1.2, "predicted_raw_s": 1.3, "measured_s": 1.4},
        base | {"algorithm": "wfbp", "kind": "plan", "predicted_s": 1.2,
                "predicted_interference_s": 1.2, "predicted_raw_s": 1.3, "measured_s": 0.9}])
    out = plain_replay_macros(frame)
    assert out["ReexecMedianExcessErr"] == "50"
    assert out["ReexecExcessUndefined"] == "1"  # measured below its control
    assert out["ReexecMedianErrRaw"] == "25.8"  # median of |1.3/1.4-1| 7.1 and |1.3/0.9-1| 44.4
