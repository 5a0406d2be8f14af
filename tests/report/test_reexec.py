"""The re-execution report: the summary table's rows and intervals, and its LaTeX is two
stacked tables."""

from __future__ import annotations

import pandas as pd

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
        "median_abs_err_int_pct": 3.21, "best_vs_ddp_default_speedup": 1.12,
        "best_vs_ddp_default_speedup_lo": 1.08, "best_vs_ddp_default_speedup_hi": 1.15,
        "best_vs_ddp_tuned_speedup": 1.01, "best_vs_ddp_tuned_speedup_lo": 0.98,
        "best_vs_ddp_tuned_speedup_hi": 1.04, "tuned_ddp": "ddp-native-5",
        "n_flagged_runs": 0}, {"case": "all", "world_size": "2", "bandwidth": "x"}])
    table, align = reexec_summary_table(stats)
    assert len(table) == 1 and len(align) == len(table.columns)
    row = table.iloc[0].tolist()
    assert row[:2] == ["ResNet-50 b2, P=2, 1 Gbit/s", "12.3"]
    assert row[2] == "0.81 [0.60, 0.90]" and row[3] == "30/45"
    assert row[6] == "1.12 [1.08, 1.15]" and row[7] == "1.01 [0.98, 1.04] (5 MB)"
