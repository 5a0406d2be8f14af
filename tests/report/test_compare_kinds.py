"""Self-checks of the parser are told apart from reproductions of published measurements,
in the compare CSV, its table and the macros.

Inputs are SYNTHETIC rows made here (never committed as measurements)."""

from __future__ import annotations

import pandas as pd

from gradsched.report import compare
from gradsched.report.compare import compare_table


def _rows() -> pd.DataFrame:
    rows = [compare.Row("nccl-busbw", f"n{i}", 10.0, 10.0001, "GB/s", 0.5).as_dict()
            for i in range(3)]
    rows += [compare.Row("bcaffe-merge", "b1", 0.69, 0.70, "ratio", 25.0).as_dict(),
             compare.Row("bcaffe-merge", "b2", 0.96, 0.69, "ratio", 25.0).as_dict()]
    rows.append(compare.skipped_row("bcaffe-merge", "b3", "no log"))
    return compare.compare_frame(rows)


def test_each_check_names_its_kind() -> None:
    frame = _rows()
    assert list(frame.columns) == list(compare.COMPARE_COLUMNS)
    kinds = dict(zip(frame["check"], frame["kind"], strict=False))
    assert kinds == {"nccl-busbw": "self-check", "bcaffe-merge": "reproduction"}
    assert frame["kind"].iloc[0] == "reproduction"  # reproductions listed first
    table, align = compare_table(frame)
    assert table.columns[0] == "kind" and len(align) == len(table.columns)


def test_macros_count_self_checks_apart_from_reproductions() -> None:
    m = compare.compare_macros(_rows())
    assert (m["CompareNumChecked"], m["CompareNumWithin"], m["CompareNumSkipped"]) == (
        "5", "4", "1")
    assert (m["CompareSelfNumChecked"], m["CompareSelfNumWithin"]) == ("3", "3")
    assert (m["CompareReproNumChecked"], m["CompareReproNumWithin"]) == ("2", "1")
    assert m["CompareReproPublishedMin"] == "0.69" and m["CompareReproPublishedMax"] == "0.96"
    assert m["CompareReproReproducedMax"] == "0.70"
    assert m["CompareReproMaxAbsDiffPct"] == f"{100 * 0.27 / 0.96:.1f}"
    assert m["CompareReproTolerancePct"] == "25.0"
    assert compare.compare_macros(None)["CompareReproNumWithin"] == "n/a"
