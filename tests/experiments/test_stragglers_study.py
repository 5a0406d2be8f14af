"""``gradsched study stragglers`` on the committed data: the ``auto`` cvs are what the study
measures, the validation rows are computed, and the empirical expected maximum is exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradsched.costmodel.stragglers import MEASURED, expected_max_normal
from gradsched.experiments.stragglers import (
    StragglerInputs,
    class_fits,
    dlrm_intervals,
    empirical_expected_max,
    h200_configurations,
    study,
)

REPO = Path(__file__).resolve().parents[2]
INPUTS = StragglerInputs(REPO / "data/h200", REPO / "traces/compute/h200",
                         REPO / "data/external/param/dlrm_kineto.tar.gz")


@pytest.fixture(scope="module")
def frames():
    return study(INPUTS)


def test_auto_values_are_the_measured_ones() -> None:
    fits = class_fits(h200_configurations(INPUTS)).set_index("device_class")
    for cls, measured in MEASURED.items():
        assert round(float(fits.loc[cls, "step_cv"]), 3) == measured.cv
    assert fits.loc["gpu-bound", "n_configs"] == 14  # the one host-bound definition
    assert fits.loc["host-bound", "n_configs"] == 4


def test_dlrm_intervals_have_eight_ranks_each() -> None:
    intervals, busy = dlrm_intervals(INPUTS.dlrm)
    counts = intervals.groupby("interval")["rank"].nunique()
    assert len(counts) == 7 and set(counts) == {8}
    assert 0.0 < busy < 1.0
    assert (intervals["compute_s"] > -1e-5).all()  # arrivals after the previous sync


def test_results_hold_fits_and_validations(frames) -> None:
    results, ep = frames
    validation = results[results["kind"] == "validation"]
    assert len(validation) == 4
    h200 = validation[validation["source"] == "H200 fit -> DLRM 8 ranks"]
    expected = h200["cv"] * expected_max_normal(8) * 100
    assert np.allclose(h200["predicted_wait_pct"], expected)
    assert np.isfinite(h200["error_pct"]).all()
    assert list(ep["world_size"]) == sorted(ep["world_size"])
    assert ep.set_index("world_size").loc[1024, "e_P"] == pytest.approx(3.2482, abs=1e-4)


def test_empirical_expected_maximum_is_exact() -> None:
    # two values: the largest of two draws is 1 unless both are 0 (probability 1/4)
    assert empirical_expected_max(np.array([0.0, 1.0]), 2) == pytest.approx(0.75)
    z = np.array([-1.0, 0.0, 2.0])
    assert empirical_expected_max(z, 1) == pytest.approx(z.mean())
    assert empirical_expected_max(z, 10_000) == pytest.approx(2.0)


def test_public_step_jitter_and_the_rank_offset_share() -> None:
    from gradsched.experiments.stragglers import rank_offset_share, step_jitter

    gpu_bound = step_jitter(REPO / "data/external/hta/ns_resolution_trace/"
                            "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    assert gpu_bound["steps"] == 3 and gpu_bound["device_class"] == "gpu-bound"
    assert gpu_bound["world_size"] == 1 and 0 < gpu_bound["cv"] < 0.01
    intervals, _ = dlrm_intervals(INPUTS.dlrm)
    share = rank_offset_share(intervals)
    assert 1 / 7 < share < 1
    # shuffling the ranks within each interval breaks any persistent offset
    rng = np.random.default_rng(0)
    shuffled = intervals.copy()
    for k in shuffled["interval"].unique():
        rows = shuffled["interval"] == k
        shuffled.loc[rows, "rank"] = rng.permutation(shuffled.loc[rows, "rank"].to_numpy())
    assert rank_offset_share(shuffled) < share
