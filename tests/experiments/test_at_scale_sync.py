"""Per-unit synchronisations of the at-scale study (gradsched.experiments.at_scale.sync) and
the independent per-unit jitter they are checked against (.unit_jitter).

Every array here is synthetic (made up to test the arithmetic), except the one committed
H200 Kineto trace read in ``test_step_kernels_of_a_committed_trace``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gradsched.costmodel.stragglers import expected_max_normal
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.at_scale.points import load_points
from gradsched.experiments.at_scale.settings import AtScaleSettings, CommChoice
from gradsched.experiments.at_scale.study import run, summary
from gradsched.experiments.at_scale.sync import sync_slack, unit_slack
from gradsched.experiments.at_scale.unit_jitter import (
    UnitJitter,
    chunk_jitter,
    load_unit_jitter,
    step_kernels,
    study,
)

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "data/h200/kineto-steps/alexnet-b256-cuda-fp32.pt.trace.json.gz"


def test_unit_slack_forward_covers_the_next_gather_backward_the_previous_and_a_reduce() -> None:
    fwd = np.array([1.0, 2.0, 4.0])
    bwd = np.array([2.0, 4.0, 8.0])
    ag = np.array([0.5, 1.0, 1.0])
    rs = np.array([1.0, 2.0, 2.0])
    shares = unit_slack(fwd, bwd, ag, rs, regather=True)
    # forward: unit j covers ag[j+1]; the last covers nothing
    assert shares[:3].tolist() == pytest.approx([1 - 1.0 / 1, 1 - 1.0 / 2, 1.0])
    # backward: unit j covers ag[j-1] (if resharded) and rs[j+1]
    assert shares[3:].tolist() == pytest.approx([1 - 2.0 / 2, 1 - (0.5 + 2.0) / 4,
                                                 1 - 1.0 / 8])
    kept = unit_slack(fwd, bwd, ag, rs, regather=False)  # SHARD_GRAD_OP: no re-gathers
    assert kept[3:].tolist() == pytest.approx([0.0, 1 - 2.0 / 4, 1.0])


def test_a_unit_sync_binds_only_where_the_late_rank_outruns_the_slack() -> None:
    shares = np.array([0.5, 0.1, -0.2])  # the last unit is comm-bound
    compute = np.array([1.0, 2.0, 3.0])
    sync = sync_slack(shares, compute, sync_points=6, world=64)
    e = expected_max_normal(64)
    assert sync.slack_share == 0.0 and sync.bind_cv == 0.0
    assert sync.e_p == pytest.approx(e)
    cv = 0.1
    want = sum(t * max(0.0, cv * e - max(s, 0.0)) for s, t in zip(shares, compute, strict=True))
    assert sync.wait_s(cv) == pytest.approx(want)
    assert sync.wait_s(0.0) == 0.0
    roomy = sync_slack(np.array([0.6, 0.9]), np.array([1.0, 1.0]), 4, 64)
    assert roomy.bind_cv == pytest.approx(0.6 / e)
    assert roomy.bind_step_cv == pytest.approx(0.6 / e / math.sqrt(2))
    assert roomy.wait_s(0.9 * roomy.bind_cv) == 0.0
    assert roomy.wait_s(1.1 * roomy.bind_cv) > 0.0
    with pytest.raises(ConfigError):
        sync_slack(shares, compute, 6, world=1)
    with pytest.raises(ConfigError):
        roomy.wait_s(1.5)


def test_chunk_jitter_separates_step_level_from_independent_variation() -> None:
    """Synthetic: 1,000 kernels of 0.1 ms in 5 steps. A pure step-level factor (every
    kernel of a step slower alike) is no independent jitter; independent noise is."""
    rng = np.random.default_rng(0)
    base = np.full(1000, 1e-4)
    common = base[None, :] * np.array([1.0, 1.02, 0.98, 1.05, 0.97])[:, None]
    j = chunk_jitter(common, 1e-3)
    assert j.chunks == 100 and j.step_cv > 0.02
    assert j.independent_cv == pytest.approx(0.0, abs=1e-12)
    # independent noise of 3 % per 0.1 ms kernel: a 1 ms chunk of 10 kernels varies by
    # about 3 % / sqrt(10)
    noisy = base[None, :] * (1 + 0.03 * rng.standard_normal((5, 1000)))
    got = chunk_jitter(noisy, 1e-3).independent_cv
    assert got == pytest.approx(0.03 / math.sqrt(10), rel=0.15)
    assert chunk_jitter(noisy, 1e-2).independent_cv < got  # longer chunks average out
    with pytest.raises(InputError):
        chunk_jitter(noisy[:2], 1e-3)


def test_step_kernels_of_a_committed_trace() -> None:
    k = step_kernels(H200)
    assert k.device == "NVIDIA H200"
    assert k.durations_s.shape[0] == 3 and k.durations_s.shape[1] > 50
    assert (k.durations_s > 0).all()


def test_study_fits_on_the_fit_traces_and_scores_the_validation(tmp_path) -> None:
    frame = study([H200], [H200])
    fit = frame[frame["role"] == "fit"]["independent_cv"].iloc[0]
    assert (frame["fit_cv"] == fit).all()
    assert frame[frame["role"] == "validation"]["error_pct"].iloc[0] == pytest.approx(0.0)
    path = tmp_path / "uj.csv"
    frame.to_csv(path, index=False)
    loaded = load_unit_jitter(path)
    assert loaded.cv == pytest.approx(fit) and loaded.validation_cv == pytest.approx(fit)
    bad = tmp_path / "bad.txt"
    bad.write_text("not a trace", encoding="utf-8")
    with pytest.raises(InputError, match="fit"):
        study([bad], [])  # unreadable: listed as not measured, and nothing left to fit
    with pytest.raises(InputError, match="not found"):
        study([H200], [tmp_path / "missing.json.gz"])


def test_the_wait_enters_only_comm_bound_units_of_the_study(tmp_path) -> None:
    """End to end on the committed torchtitan group with a synthetic alpha-beta model: the
    switch adds the per-unit waits to the predicted step where the jitter outruns the
    smallest slack, and nothing where it does not."""
    points = [p for p in load_points(REPO / "data/external/at-scale/points.csv")
              if p.group == "torchtitan-h100-llama-3.1-8b-fsdp-s8192-mb2"]
    comm = (CommChoice("h100", "alpha-beta:alpha=1e-5,beta=3e-11", "synthetic"),)
    off = run(points, AtScaleSettings(comm=comm))
    bind = off.iloc[-1]["unit_bind_cv"]
    assert 0 < bind < 0.5
    for cv, binds in ((0.5 * bind, False), (min(0.99, 2 * bind), True)):
        jitter = UnitJitter(cv, math.nan, "synthetic")
        on = run(points, AtScaleSettings(comm=comm, unit_jitter=jitter))
        last_off, last_on = off.iloc[-1], on.iloc[-1]
        assert (last_on["unit_sync_wait_s"] > 0) == binds
        assert (last_on["predicted_step_s"] > last_off["predicted_step_s"]) == binds
        stats = summary(on, 0.01, jitter)
        assert stats["unit_stragglers"] == "on"
        assert stats["unit_jitter_binding_points"] == int(binds)
