"""The table of the at-scale study's effects (gradsched.experiments.at_scale.effects, report
gradsched.report.at_scale.effects_table). The stragglers and unit-jitter frames here are
synthetic (made-up numbers in the columns their studies write); the overlap model is the
committed one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gradsched.errors import InputError
from gradsched.experiments.at_scale.effects import effects_frame
from gradsched.report.at_scale import EFFECT_COLUMNS, effects_table

REPO = Path(__file__).resolve().parents[2]
MODEL = json.loads((REPO / "src/gradsched/costmodel/overlap_slowdown.json").read_text(
    encoding="utf-8"))
STRAGGLERS = pd.DataFrame({
    "kind": ["fit", "validation", "validation"], "source": ["s", "s", "s"],
    "device_class": ["gpu-bound", "gpu-bound", "host-bound"],
    "samples": ["2 configs", "8 ranks", "8 ranks"], "cv": [0.03, 0.03, 0.2],
    "error_pct": [float("nan"), -90.0, -40.0]})
JITTER = pd.DataFrame({
    "role": ["fit", "fit", "validation", "validation", "validation"],
    "measured": [True, False, True, True, False],
    "independent_cv": [0.005, float("nan"), 0.01, 0.02, float("nan")],
    "fit_cv": [0.005] * 5, "error_pct": [float("nan"), float("nan"), -50.0, -75.0,
                                         float("nan")]})


def test_one_row_per_effect_from_its_own_outputs() -> None:
    frame = effects_frame(MODEL, STRAGGLERS, JITTER)
    assert frame["switch"].tolist() == ["--overlap-slowdown", "--stragglers", "--unit-jitter"]
    overlap, stragglers, jitter = (frame.iloc[i] for i in range(3))
    a100 = MODEL["generations"]["A100"]
    assert overlap["fit_error_pct"] == pytest.approx(100 * a100["fit"]["error_fitted"], abs=0.05)
    assert overlap["validation_error_pct"] == pytest.approx(
        100 * a100["validation"]["error_fitted"], abs=0.05)
    assert stragglers["validation_error_pct"] == -90.0  # the gpu-bound row, not host-bound
    assert "0.0300" in stragglers["value"]
    assert jitter["validation_error_pct"] == -75.0  # the worst measured validation trace
    assert "1 with identical steps" in jitter["calibrated_on"]
    assert "2 with identical steps" in jitter["validated_on"]
    table, align = effects_table(frame)
    assert list(table.columns) == list(EFFECT_COLUMNS) and len(table) == 3
    assert align.count("p{") + align.count("l") + align.count("r") == len(EFFECT_COLUMNS)


def test_missing_inputs_are_refused() -> None:
    with pytest.raises(InputError, match="A100"):
        effects_frame({"generations": {}}, STRAGGLERS, JITTER)
    with pytest.raises(InputError, match="gpu-bound"):
        effects_frame(MODEL, STRAGGLERS[STRAGGLERS["device_class"] == "host-bound"], JITTER)
    with pytest.raises(InputError, match="missing"):
        effects_frame(MODEL, STRAGGLERS, JITTER.drop(columns="fit_cv"))
    with pytest.raises(InputError, match="no measured fit"):
        effects_frame(MODEL, STRAGGLERS, JITTER.assign(measured=False))
