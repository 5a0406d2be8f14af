"""The at-scale decomposition's macros (gradsched.report.at_scale.decompose_macros), which
the at-scale section's prose quotes: every name of DECOMPOSE_MACROS is written, and the
published growth, the worst-fitting points and the points no slowdown reaches come from the
frames. The rows are SYNTHETIC (two groups, made-up steps)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gradsched.errors import InputError
from gradsched.report.at_scale import DECOMPOSE_MACROS, decompose_macros


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    points = pd.DataFrame({
        "group": ["g-big"] * 3 + ["g-small"] * 3, "model": ["m-9b"] * 3 + ["m-1b"] * 3,
        "gpus": [8, 16, 32] * 2,
        "published_step_s": [10.0, 10.2, 10.5, 1.0, 1.1, 1.25]})
    frame = pd.DataFrame({
        "group": ["g-big", "g-big", "g-small", "g-small"],
        "model": ["m-9b", "m-9b", "m-1b", "m-1b"], "gpus": [16, 32, 16, 32],
        "nodes": [2, 4, 2, 4], "published_step_s": [10.2, 10.5, 1.1, 1.25],
        "missing_s": [0.1, 0.3, 0.05, 0.2], "exposed_comm_s": [0.1, 0.1, 0.01, 0.02],
        "exposed_comm_needed_s": [0.2, 0.4, 0.06, 0.22], "comm_factor": [1.2, 1.5, 2.0, 3.0],
        "model_busbw_GBps": [80, 70, 80, 70], "implied_busbw_GBps": [60, 40, 40, 20],
        "slowdown_applied": [1.05] * 4, "slowdown_needed": [1.3, 1.6, 2.0, math.inf]})
    return frame, points


def test_every_name_is_written_and_the_values_come_from_the_frames() -> None:
    macros = decompose_macros(*_frames())
    assert set(macros) == {f"AtScaleDecomp{name}" for name in DECOMPOSE_MACROS}
    get = {k.removeprefix("AtScaleDecomp"): v for k, v in macros.items()}
    assert (get["GrowthMin"], get["GrowthMax"]) == ("5.0", "25.0")  # 10.5/10, 1.25/1
    assert (get["IncreaseSmallest"], get["SmallestModel"]) == ("0.25", "M-1B")
    assert (get["IncreaseLargest"], get["StepLargest"], get["LargestModel"]) == (
        "0.50", "10.0", "M-9B")
    assert get["WorstModels"] == "M-1B and M-9B"  # both points at 4 nodes, shorter first
    assert (get["WorstMissingMin"], get["WorstMissingMax"]) == ("0.20", "0.30")
    assert (get["SlowdownNone"], get["SlowdownNoneModels"]) == ("1", "M-1B")
    assert (get["SlowdownMin"], get["SlowdownMax"]) == ("1.30", "2.00")
    assert (get["TopNodes"], get["TopImpliedBusbwMin"], get["LowImpliedBusbwMax"]) == (
        "4", "20", "60")


def test_points_lacking_a_decomposed_group_are_refused() -> None:
    frame, points = _frames()
    with pytest.raises(InputError, match="g-small"):
        decompose_macros(frame, points[points["group"] != "g-small"])
