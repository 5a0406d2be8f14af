"""The at-scale table and macros (gradsched.report.at_scale) on the study's frames of two
small SYNTHETIC groups (the rows of tests/experiments/test_at_scale.py)."""

from __future__ import annotations

import pytest

from gradsched.errors import InputError
from gradsched.experiments.at_scale.points import load_points
from gradsched.experiments.at_scale.study import run, summary
from gradsched.report.at_scale import (
    at_scale_macros,
    at_scale_table,
    group_label,
    variants_table,
)
from tests.experiments.test_at_scale import GOOD, settings, write


def test_one_row_per_group_with_one_value_per_predicted_count(tmp_path) -> None:
    frame = run(load_points(write(tmp_path / "p.csv", GOOD)), settings())
    table, align = at_scale_table(frame)
    assert len(table) == 2 and len(align) == len(table.columns)
    first = table.iloc[0]
    assert first["P: calibrated: predicted"] == "8: 16, 32"
    assert first["perfect scaling [%]"] == "-3.8/-9.1"  # 0.5/0.52 - 1, 0.5/0.55 - 1
    assert len(first["error [%]"].split("/")) == 2
    macros = at_scale_macros(summary(frame, 0.01))
    assert macros["AtScalePoints"] == "3" and macros["AtScaleGroups"] == "2"


def test_a_group_without_its_calibration_point_is_refused(tmp_path) -> None:
    frame = run(load_points(write(tmp_path / "p.csv", GOOD)), settings())
    with pytest.raises(InputError, match="calibration"):
        at_scale_table(frame[frame["gpus"] != 8])


def test_labels_abbreviate_the_source() -> None:
    assert group_label("llm-foundry", "llm-foundry-a10040-mpt-125m-s2048-mb26") == \
        "LF: a10040-mpt-125m-mb26"
    assert group_label("other", "other-x") == "other: x"


def test_variants_table_has_one_row_per_summary(tmp_path) -> None:
    frame = run(load_points(write(tmp_path / "p.csv", GOOD)), settings())
    table, align = variants_table([summary(frame, 0.01), summary(frame, 0.01)])
    assert len(table) == 2 and len(align) == len(table.columns)
    assert table["comm models"].iloc[0] == "synthetic-ab (A100)"
