"""The decomposition of the at-scale study's missing growth
(gradsched.experiments.at_scale.decompose): the collective-time factor search, and on a
synthetic group (rows labelled synthetic, MPT-125M's published shape) that the factor it
reports makes the replay reach the published step, that the exposed communication needed
is the replay's plus what is missing, and that the overlap slowdown needed follows the
first-order relation of the module docstring."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gradsched.costmodel.base import AlphaBetaModel, load_comm_spec
from gradsched.experiments.at_scale.decompose import (
    comm_factor,
    decompose,
    matching_groups,
    point_rows,
)
from gradsched.experiments.at_scale.points import load_points
from gradsched.experiments.at_scale.predict import at_mfu, base_trace, calibrate_mfu, replay_step
from gradsched.experiments.at_scale.study import run
from tests.experiments.test_at_scale import AB, row, settings, write


def test_comm_factor_finds_the_knee_of_a_hidden_then_exposed_step() -> None:
    # synthetic: 1 s of compute hides up to 0.5 s of communication, then it is exposed
    def step(f: float) -> float:
        return 1.0 + max(0.0, 0.4 * f - 0.5)

    assert comm_factor(step, 1.1) == pytest.approx(1.5, rel=1e-3)
    assert math.isnan(comm_factor(step, 1.0))  # nothing missing
    assert comm_factor(step, 1e3) == math.inf  # beyond the search


def test_decomposition_of_a_synthetic_group(tmp_path) -> None:
    # synthetic group: the larger counts publish more growth than the alpha-beta model gives
    rows = [row("g1", 8, 0.5), row("g1", 64, 0.56), row("g1", 128, 0.49),
            row("h2", 8, 0.5), row("h2", 16, 0.5)]
    points = load_points(write(tmp_path / "p.csv", rows))
    assert list(matching_groups(points)) == ["g1", "h2"]
    assert not matching_groups(points, "^2")
    s = settings(overlap_slowdown=False)
    frame = decompose(points, s, "g")
    study = run(points, s)
    pred = study[~study["calibration"] & (study["group"] == "g1")]
    assert frame["gpus"].tolist() == [64, 128]
    assert frame["predicted_step_s"].tolist() == pytest.approx(
        pred["predicted_step_s"].tolist(), rel=1e-9)
    slow, fast = frame.iloc[0], frame.iloc[1]
    assert slow["missing_s"] > 0 and fast["missing_s"] < 0
    assert slow["exposed_comm_needed_s"] == pytest.approx(
        slow["exposed_comm_s"] + slow["missing_s"], abs=2e-6)
    assert math.isnan(fast["comm_factor"]) and math.isnan(fast["slowdown_needed"])
    # the factor found makes the replay reach the published step
    p = points[1]
    model = load_comm_spec(AB)
    mfu = calibrate_mfu(points[0], model, s)
    trace = at_mfu(base_trace(p), mfu)
    f = float(slow["comm_factor"])
    assert replay_step(trace, p, model, s, f).replay.iteration_s == pytest.approx(
        p.published_step_s, rel=2e-3)
    assert replay_step(trace, p, model, s, 0.99 * f).replay.iteration_s < p.published_step_s
    assert slow["implied_busbw_GBps"] == pytest.approx(slow["model_busbw_GBps"] / f, rel=2e-2)
    # the alpha-beta line does not grow with P: no slowdown of overlapped compute can help
    assert slow["comm_busy_growth_s"] == 0 and slow["slowdown_needed"] == math.inf


class GrowingComm(AlphaBetaModel):
    """Synthetic: an alpha-beta line whose per-byte time grows with log2 P."""

    def raw_times(self, collective, nbytes, world_size):
        return super().raw_times(collective, nbytes, world_size) * math.log2(world_size)


def test_overlap_slowdown_needed_follows_the_first_order_relation(tmp_path) -> None:
    rows = [row("g1", 8, 0.5), row("g1", 64, 0.53)]
    points = load_points(write(tmp_path / "p.csv", rows))
    s = settings(overlap_slowdown=False)
    model = GrowingComm(alpha=2e-5, beta=4e-11)
    got = point_rows(points, calibrate_mfu(points[0], model, s), model, s)[0]
    assert got["missing_s"] > 0 and got["comm_busy_growth_s"] > 0
    inv = 1 / got["slowdown_applied"] - got["missing_s"] / got["comm_busy_growth_s"]
    assert got["slowdown_needed"] == pytest.approx(1 / inv if inv > 0 else math.inf, rel=1e-3)


def test_report_formats_the_decomposition_and_its_ranges(tmp_path) -> None:
    from gradsched.report.at_scale import decompose_macros, decompose_table

    rows = [row("g1", 8, 0.5), row("g1", 64, 0.53), row("g1", 128, 0.6)]
    points = load_points(write(tmp_path / "p.csv", rows))
    s = settings(overlap_slowdown=False)
    model = GrowingComm(alpha=2e-5, beta=4e-11)
    frame = pd.DataFrame(point_rows(points, calibrate_mfu(points[0], model, s), model, s))
    table, align = decompose_table(frame)
    assert len(table) == 2 and len(align) == table.shape[1]
    published = pd.DataFrame({"group": [r["group"] for r in rows],
                              "model": [r["model"] for r in rows],
                              "gpus": [r["gpus"] for r in rows],
                              "published_step_s": [r["step_s"] for r in rows]})
    macros = decompose_macros(frame, published)
    assert macros["AtScaleDecompGrowthMax"] == "20.0"  # 0.6 s at 128 GPUs over 0.5 s at 8
    assert macros["AtScaleDecompTopNodes"] == "16"
    assert float(macros["AtScaleDecompFactorMax"]) == pytest.approx(
        frame["comm_factor"].max(), abs=0.006)
    none = int(macros["AtScaleDecompSlowdownNone"])
    assert none == int((frame["slowdown_needed"] == math.inf).sum())
    assert (table["needed"] == "none").sum() == none
