"""What the at-scale study shares between the variants of one process (one `gradsched batch`
job): the base traces, the comm models and their memoised collective times. Sharing must
not change a number: a second study in the same process gives the frame of the first."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gradsched.costmodel.base import comm_times, load_comm_spec
from gradsched.experiments.at_scale import predict
from gradsched.experiments.at_scale.points import load_points
from gradsched.experiments.at_scale.study import run
from tests.experiments.test_at_scale import GOOD, settings, write


def test_a_model_file_is_loaded_once_per_content(tmp_path) -> None:
    spec = tmp_path / "ab.json"
    load_comm_spec("alpha-beta:alpha=1e-5,beta=1e-10").save(spec)
    first = predict.comm_model(str(spec))
    assert predict.comm_model(str(spec)) is first
    load_comm_spec("alpha-beta:alpha=2e-5,beta=1e-10").save(spec)
    again = predict.comm_model(str(spec))
    assert again is not first  # the file changed: a new model, not the stale one
    assert again.time("all_gather", 0.0, 8) != first.time("all_gather", 0.0, 8)


def test_memoised_times_equal_the_model_and_are_copies() -> None:
    model = load_comm_spec("alpha-beta:alpha=2e-5,beta=4e-11")
    sizes = np.array([1e6, 3e7, 0.0])
    got = predict._times(model, "all_gather", sizes, 16)
    assert np.array_equal(got, comm_times(model, "all_gather", sizes, 16))
    got *= 2  # a caller scaling its copy leaves the memo alone
    assert np.array_equal(predict._times(model, "all_gather", sizes, 16),
                          comm_times(model, "all_gather", sizes, 16))
    assert np.array_equal(predict._times(model, "all_gather", sizes, 1), np.zeros(3))


def test_a_second_study_in_one_process_gives_the_same_frame(tmp_path) -> None:
    points = load_points(write(tmp_path / "p.csv", GOOD))
    predict.base_trace.cache_clear()
    first = run(points, settings())
    assert predict.base_trace.cache_info().hits > 0  # calibration and rows share a trace
    second = run(points, settings())
    pd.testing.assert_frame_equal(first, second)


def test_a_scaled_trace_reuses_the_layers_of_its_base_exactly(tmp_path) -> None:
    from gradsched.traces.layers import _layer_seq

    point = load_points(write(tmp_path / "p.csv", GOOD))[0]
    base = predict.base_trace(point)
    scaled = predict.at_mfu(base, 0.37)
    assert "sharded_layers" in scaled._cache  # seeded from the base, not recomputed
    got, fresh = scaled._cache["sharded_layers"], _layer_seq(scaled)
    assert got.tensors == fresh.tensors and got.block == fresh.block
    for name in ("nbytes", "forward_s", "backward_s", "update_s"):
        assert np.array_equal(getattr(got, name), getattr(fresh, name))  # bit for bit
    other = base.frame.assign(layer=base.frame["layer"][::-1].to_numpy())
    renamed = predict._same_layers(predict.ComputeTrace(frame=other, meta=base.meta), base)
    assert "sharded_layers" not in renamed._cache  # other layers: left to layer_seq
