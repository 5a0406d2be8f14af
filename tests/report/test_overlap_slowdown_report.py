"""The overlap-slowdown table and macros: formatting of a summary frame (SYNTHETIC values)."""

from __future__ import annotations

import pandas as pd

from gradsched.report.overlap_slowdown import overlap_macros, overlap_slowdown_table

SUMMARY = pd.DataFrame([
    {"generation": "A100", "role": "fit", "traces": "data/x/a.json.gz", "slowdown": 1.0645,
     "physical_slowdown": 1.08, "groups": 23, "measured_slowdown": 1.0645,
     "error_fitted": 0.0447, "error_no_effect": 0.0925, "error_physical": 0.0599},
    {"generation": "A100", "role": "validation", "traces": "data/x/b.json.gz (second-half)",
     "slowdown": 1.0645, "physical_slowdown": 1.08, "groups": 42, "measured_slowdown": 1.03,
     "error_fitted": 0.0575, "error_no_effect": 0.0488, "error_physical": 0.0743},
    {"generation": "H200", "role": "borrowed from A100", "traces": None, "slowdown": 1.0645}])


def test_table_rows_and_file_names() -> None:
    table, align = overlap_slowdown_table(SUMMARY)
    assert list(table["files"]) == ["a.json.gz", "b.json.gz (second-half)", ""]
    assert list(table["error, model (%)"]) == ["4.5", "5.8", ""]
    assert table["model s"].iloc[2] == "1.065" and len(align) == table.shape[1]


def test_macros_without_data_are_na_and_with_data_are_the_numbers() -> None:
    empty = overlap_macros(None)
    assert empty["OverlapAOneZeroZeroSlowdown"] == "n/a"
    assert empty["OverlapMinReferenceUs"] == "10"
    full = overlap_macros(SUMMARY)
    assert set(full) == set(empty)  # the same names with or without data
    assert full["OverlapAOneZeroZeroSlowdown"] == "1.065"
    assert full["OverlapAOneZeroZeroValidationNoEffectErrorPct"] == "4.9"
    assert full["OverlapVOneZeroZeroSlowdown"] == "n/a"
