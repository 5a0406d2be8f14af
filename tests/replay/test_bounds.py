"""The lower bound holds for every plan, every ready order and every model kind.

All traces and sweeps here are SYNTHETIC (random or hand-made); nothing is a measurement.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.costmodel.base import AlphaBetaModel, CommModel
from gradsched.costmodel.formulas import AnalyticModel
from gradsched.costmodel.interp import InterpCurve, InterpModel
from gradsched.costmodel.piecewise import PiecewiseCurve, PiecewiseModel
from gradsched.costmodel.scaling import ScaledModel
from gradsched.costmodel.series import AlphaBetaSeriesModel
from gradsched.costmodel.tuned import TunedModel
from gradsched.plan import Bucket, Plan
from gradsched.replay import ReplayOptions, lower_bound, replay
from gradsched.traces import ComputeTrace

MS = 1e-3
P = 4
META = {"kind": "compute", "model": "synthetic-bound", "batch_size": 1, "device": "none",
        "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
        "iterations": None, "date": "2026-11-23",
        "source": "SYNTHETIC test fixture, not measured"}


def random_trace(seed: int, n: int) -> ComputeTrace:
    """SYNTHETIC: ``n`` tensors over fewer layers, a random ready order (not only
    backprop's reverse order), random forward/backward/update times and sizes."""
    rng = np.random.default_rng(seed)
    layer = np.sort(rng.integers(0, max(1, n * 2 // 3), size=n))
    numel = rng.integers(1, 2**18, size=n)
    frame = pd.DataFrame({
        "name": [f"t{i}" for i in range(n)], "layer": layer, "numel": numel,
        "bytes": numel * 4,
        "forward_s": rng.uniform(0.0, 2.0, size=n) * MS,
        "backward_s": rng.uniform(0.0, 4.0, size=n) * MS,
        "update_s": rng.uniform(0.0, 0.2, size=n) * MS,
        "ready_order": rng.permutation(n) if rng.random() < 0.7 else np.arange(n)[::-1],
    })
    return ComputeTrace.from_frame(frame, META)


def random_plan(trace: ComputeTrace, seed: int) -> Plan:
    """Random buckets of every shape: any grouping (not only contiguous), chunks,
    priorities, release times, all-reduce or reduce-scatter + all-gather, channels, update."""
    rng = np.random.default_rng(seed + 1)
    names = list(trace.frame["name"])
    rng.shuffle(names)
    cuts = sorted(rng.choice(np.arange(1, len(names)), size=rng.integers(0, len(names)),
                             replace=False)) if len(names) > 1 else []
    buckets = tuple(
        Bucket(tuple(g), collective="rs_ag" if rng.random() < 0.3 else "all_reduce",
               chunks=int(rng.integers(1, 6)),
               priority=int(rng.integers(0, 5)) if rng.random() < 0.5 else None,
               release_s=float(rng.uniform(0, 5 * MS)) if rng.random() < 0.2 else None)
        for g in np.split(np.array(names), cuts))
    per_layer = rng.random() < 0.5 or any(b.collective == "rs_ag" for b in buckets)
    return Plan("random", buckets, update="per_layer" if per_layer else "global",
                channels=int(rng.integers(1, 4)))


def burst_sweep_model() -> InterpModel:
    """SYNTHETIC shaped sweep: a 64 KiB token bucket lets small messages through 4x faster
    than the 12.5 MB/s line; the model must be clipped to the line."""
    m = np.geomspace(8, 2**22, 20)
    line = 12.5e6 * P / (2 * (P - 1))
    t = np.where(m <= 65536, 4e-4 + m / (4 * line), 4e-4 + (m - 49152) / line)
    curve = InterpCurve.from_points(m, t)[0]
    return InterpModel({("all_reduce", P): curve}, {"line_rate_Bps": 12.5e6})


def models() -> list[CommModel]:
    piecewise = PiecewiseCurve(2e-4, (65536.0, 2.0**20), (4e-8, 8e-9, 1e-8))
    series = PiecewiseModel({("all_reduce", P): piecewise,
                             ("reduce_scatter", P): PiecewiseCurve(1e-4, (), (3e-9,))})
    ab_series = AlphaBetaSeriesModel({("all_reduce", 2): (1e-4, 1e-8)})
    return [
        AlphaBetaModel(5e-4, 1e-8),
        AlphaBetaModel(5e-4, 1e-8, {"all_gather": (1e-5, 1e-9)}),  # a fast measured AG
        series,
        burst_sweep_model(),
        AnalyticModel(2e-5, 1e-9, algorithm="best"),
        ScaledModel(ab_series, AnalyticModel(1e-4, 1e-8)),
        TunedModel(analytic={"ring": (1e-4, 1e-8, 0.0), "rd": (5e-5, 1e-8, 0.0)}),
    ]


MODELS = models()


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 14),
       which=st.integers(0, len(MODELS) - 1), executor=st.booleans(),
       cpu=st.sampled_from([0.0, 0.0, 2e-4]))
def test_no_plan_beats_the_bound(seed: int, n: int, which: int, executor: bool,
                                 cpu: float) -> None:
    trace = random_trace(seed, n)
    model = MODELS[which]
    plan = random_plan(trace, seed)
    options = ReplayOptions(iterations=3, channels=plan.channels or 1, collective_cpu_s=cpu,
                            issue="executor" if executor else "dynamic")
    result = replay(trace, plan, model, P, options)
    bound = lower_bound(trace, model, P)
    assert result.iteration_s >= bound.lower_bound_s * (1 - 1e-9), (bound, plan)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 12),
       which=st.integers(0, len(MODELS) - 1))
def test_no_collective_beats_the_wire(seed: int, n: int, which: int) -> None:
    """Any split of m bytes into pieces costs at least m at the sustained bandwidth."""
    model = MODELS[which]
    rng = np.random.default_rng(seed)
    pieces = rng.integers(1, 2**20, size=n).astype(float)
    rate = model.sustained_algbw_Bps(P)
    for collective, share in (("all_reduce", 1.0), ("reduce_scatter", 0.5),
                              ("all_gather", 0.5)):
        work = model.times(collective, pieces, P) - model.startup_s(collective, P)
        assert np.all(work >= share * pieces / rate * (1 - 1e-9))


def test_burst_region_is_clipped_to_the_line_rate() -> None:
    model = burst_sweep_model()
    line_algbw = 12.5e6 * P / (2 * (P - 1))
    assert model.sustained_algbw_Bps(P) == pytest.approx(line_algbw)
    m = np.array([4096.0, 32768.0, 65536.0])
    raw = model.raw_times("all_reduce", m, P)
    floor = model.startup_s("all_reduce", P) + m / line_algbw
    assert np.all(raw < floor)  # the sweep beats the wire in its burst region ...
    np.testing.assert_allclose(model.times("all_reduce", m, P), floor)  # ... the model not


def test_last_ready_gradient_need_not_be_the_input_side_one() -> None:
    """The counterexample to a bound that assumed the input-side gradient is ready last: when
    the gradient ready last is an output-side layer (forward last), a per-layer plan hides
    its communication behind the next forward; a bound that charges its bytes after the
    whole compute exceeds a real plan."""
    frame = pd.DataFrame({
        "name": ["in", "out"], "layer": [0, 1], "numel": [250, 1_000_000],
        "bytes": [1000, 4_000_000], "forward_s": [8 * MS, 1 * MS],
        "backward_s": [1 * MS, 1 * MS], "ready_order": [0, 1],  # 'out' is ready last
    })
    trace = ComputeTrace.from_frame(frame, META)
    model = AlphaBetaModel(1e-4, 1e-9)  # 4 MB in 4 ms
    plan = Plan("per-layer", (Bucket(("in",), priority=0), Bucket(("out",), priority=1)),
                update="per_layer")
    res = replay(trace, plan, model, P)
    old_bound = 10 * MS + 4_000_000 * 1e-9  # compute + the last-ready tensor's bytes
    assert res.iteration_s < old_bound
    assert lower_bound(trace, model, P).lower_bound_s <= res.iteration_s * (1 + 1e-12)


def test_bound_binds_when_communication_dominates() -> None:
    """One tensor ready at once, a slow network: the bound is the wire time itself."""
    frame = pd.DataFrame({"name": ["w"], "layer": [0], "numel": [2_500_000],
                          "bytes": [10_000_000], "forward_s": [1 * MS],
                          "backward_s": [1 * MS], "ready_order": [0]})
    trace = ComputeTrace.from_frame(frame, META)
    model = AlphaBetaModel(1e-3, 1e-8)  # 100 ms for 10 MB
    bound = lower_bound(trace, model, P)
    res = replay(trace, Plan("one", (Bucket(("w",)),)), model, P)
    assert bound.lower_bound_s == pytest.approx(res.iteration_s, rel=0.01)


def _committed_sweeps() -> list:
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    # the sweeps the replay's networks use (traces/comm/collectives holds per-algorithm
    # series for the tuned model, covered by the property test above)
    return sorted([*(repo / "traces/comm/cpu").glob("*.csv"),
                   *(repo / "traces/comm/external").glob("*.csv")])


@pytest.mark.parametrize("path", _committed_sweeps(), ids=lambda p: p.stem)
def test_no_committed_sweep_beats_the_wire(path) -> None:
    """On every committed comm trace: any split of m bytes costs at least m at the
    sustained bandwidth (and a shaped link's sustained bandwidth is at most its rate)."""
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.costmodel.wire import ring_algbw_limit

    model = load_comm_spec(str(path))
    rng = np.random.default_rng(7)
    for world in model.world_sizes() or ():
        if world < 2:
            continue
        rate = model.sustained_algbw_Bps(world)
        if model.line_rate_Bps() is not None:
            assert rate <= ring_algbw_limit(model.line_rate_Bps(), world) * (1 + 1e-12)
        pieces = rng.integers(1, 2**22, size=64).astype(float)
        work = model.times("all_reduce", pieces, world) - model.startup_s("all_reduce", world)
        assert work.sum() >= pieces.sum() / rate * (1 - 1e-9)
