"""The re-execution report: its LaTeX table is two stacked tables."""

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
