"""MG-WFBP against search when the replay charges the calibrated per-collective cost.

Inputs are SYNTHETIC replay rows made here (never committed as measurements)."""

from __future__ import annotations

import pandas as pd

from gradsched.report import calibrated, latex


def test_calibrated_gaps_can_be_negative() -> None:
    rows = [("a/tbf1gbit-p2", "mgwfbp", 6.2), ("a/tbf1gbit-p2", "search", 6.5),
            ("a/tbf1gbit-p2", "contiguous_optimum", 5.8),
            ("b/tbf100mbit-p3", "mgwfbp", 2.2), ("b/tbf100mbit-p3", "search", 2.0),
            ("b/tbf100mbit-p3", "contiguous_optimum", 2.2)]
    runs = pd.DataFrame(rows, columns=["case", "algorithm", "iteration_s"])
    m = calibrated.calibrated_gap_macros(runs)
    assert m["CalibratedNumCases"] == "2"
    assert m["CalibratedMgwfbpSearchGapMinPct"] == f"{100 * (6.2 / 6.5 - 1):.1f}"
    assert m["CalibratedMgwfbpSearchGapMaxPct"] == f"{100 * (2.2 / 2.0 - 1):.1f}"
    assert m["CalibratedSearchSlowerCases"] == "1"
    assert m["CalibratedMgwfbpContigGapMinPct"] == "0.0"  # never "-0.0"
    assert calibrated.calibrated_gap_macros(None)["CalibratedNumCases"] == "n/a"


def test_number_never_writes_negative_zero() -> None:
    assert latex.number(-1e-12) == "0.0" and latex.number(-0.04) == "0.0"
    assert latex.number(-0.05, 2) == "-0.05"
