"""DeAR as its reference code runs it.

Each test names the source line it follows: lzhangbv/dear_pytorch (commit 43138d8)
``dear/dear_dopt.py``.

Every trace here is SYNTHETIC (built in the test with known numbers), labelled so in its
metadata.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.experiments import make_plan
from gradsched.plan import Bucket, Plan
from gradsched.replay import ReplayOptions, replay
from gradsched.traces import ComputeTrace
from tests.planners.test_planners import MB, engine_s, tiny_trace
from tests.planners.test_properties import SETTINGS, alpha_beta, traces

MS = 1e-3
META = {
    "kind": "compute", "model": "hand-3", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23", "source": "SYNTHETIC hand-computed test case, not measured",
}
# T(m bytes) = 0.5 + 0.01 m ms for an all-reduce; reduce-scatter = all-gather = half.
MODEL = AlphaBetaModel(alpha=0.5 * MS, beta=0.01 * MS)


def three_layers(forward_ms: tuple[float, float, float]) -> ComputeTrace:
    """SYNTHETIC: layers L0-L2 (100, 200, 300 bytes), gradients ready (from backward
    start) at L2 1 ms, L1 3 ms, L0 4 ms; forward times as given."""
    frame = pd.DataFrame({
        "name": ["L0", "L1", "L2"], "layer": [0, 1, 2], "numel": [25, 50, 75],
        "bytes": [100, 200, 300], "forward_s": [f * MS for f in forward_ms],
        "backward_s": [1 * MS, 2 * MS, 1 * MS], "ready_order": [2, 1, 0],
    })
    return ComputeTrace.from_frame(frame, META)


def rs_ag_plan(ag_issue: str, update: str = "per_layer") -> Plan:
    """One rs_ag bucket per layer, in ready order (DeAR with a tiny threshold)."""
    buckets = tuple(Bucket((n,), "rs_ag") for n in ("L2", "L1", "L0"))
    return Plan("dear", buckets, update=update, ag_issue=ag_issue)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# DeAR's all-gather schedule.
# RS = AG = 0.25 + 0.005 m ms: RS L2 1 -> 2.75, RS L1 3 -> 4.25, RS L0 4.25 -> 5.0.
# Forward 3, 0.5, 3 ms, starting at the end of backward (4 ms).
# eager: AG L0 5.0 -> 5.75, AG L1 -> 7.0, AG L2 -> 8.75 back to back; forward L0
#   5.75 -> 8.75, L1 max(8.75, 7.0) -> 9.25, L2 max(9.25, 8.75) -> 12.25: period 12.25 ms.
# lookahead (dear_dopt.py L352-353: AG of group 0 once every RS is done, at 5.0 -> 5.75;
#   L283-287: group g's pre-hook waits for g's AG and issues g+1's): hook L0 at
#   max(4, 5.75) = 5.75 issues AG L1 5.75 -> 7.0; L0 runs 5.75 -> 8.75; hook L1 at
#   max(8.75, 7.0) = 8.75 issues AG L2 8.75 -> 10.5; L1 runs 8.75 -> 9.25; L2 waits for
#   its AG: 10.5 -> 13.5: period 13.5 ms.
# ---------------------------------------------------------------------------------------
def test_lookahead_all_gathers_hand_computed() -> None:
    trace = three_layers((3.0, 0.5, 3.0))
    eager = replay(trace, rs_ag_plan("eager"), MODEL, 4, timeline=True)
    ahead = replay(trace, rs_ag_plan("lookahead"), MODEL, 4, timeline=True)
    assert eager.iteration_s == pytest.approx(12.25 * MS)
    assert ahead.iteration_s == pytest.approx(13.5 * MS)
    # iteration 0's backward starts after its forward (6.5 ms); times relative to it
    gathers = sorted(t - 6.5 * MS for e in ahead.events
                     if e.iteration == 0 and e.kind == "all_gather" for t in (e.start_s, e.end_s))
    assert gathers == pytest.approx([x * MS for x in (5.0, 5.75, 5.75, 7.0, 8.75, 10.5)])


def test_lookahead_equals_eager_when_forward_is_free() -> None:
    # No forward and no update: each pre-hook is reached as soon as the all-gather it
    # waits for ends, so group g+1's all-gather starts when it would eagerly.
    trace = three_layers((0.0, 0.0, 0.0))
    assert (replay(trace, rs_ag_plan("lookahead"), MODEL, 4).iteration_s
            == pytest.approx(replay(trace, rs_ag_plan("eager"), MODEL, 4).iteration_s))


def test_lookahead_needs_a_per_layer_update() -> None:
    with pytest.raises(ConfigError, match="per_layer"):
        replay(three_layers((1, 1, 1)), rs_ag_plan("lookahead", "global"), MODEL, 4)


def test_replay_rejects_bad_timing_fields() -> None:
    trace = three_layers((1, 1, 1))
    with pytest.raises(ConfigError, match="ag_issue"):
        replay(trace, rs_ag_plan("early"), MODEL, 4)
    plan = Plan("x", (Bucket(("L0", "L1", "L2")),), credit_bytes=0.0)
    with pytest.raises(ConfigError, match="credit_bytes"):
        replay(trace, plan, MODEL, 4)


def test_executor_issue_keeps_eager_all_gathers() -> None:
    # gradsched's executor issues every all-gather after backward (no lookahead).
    trace = three_layers((3.0, 0.5, 3.0))
    opts = ReplayOptions(iterations=5, issue="executor")
    assert (replay(trace, rs_ag_plan("lookahead"), MODEL, 4, opts).iteration_s
            == pytest.approx(replay(trace, rs_ag_plan("eager"), MODEL, 4, opts).iteration_s))


@SETTINGS
@given(trace=traces(), model=alpha_beta, threshold=st.floats(0.001, 2.0))
def test_lookahead_is_never_faster_than_eager(trace: ComputeTrace, model: AlphaBetaModel,
                                              threshold: float) -> None:
    # Each lookahead all-gather starts no earlier than its eager twin (by induction over
    # groups: max(pre-hook, previous end) >= previous end), so the forward cannot finish
    # earlier.
    knobs = {"search": "none", "threshold_mb": threshold}
    ahead = make_plan("dear", trace, model, 8, knobs | {"ag_issue": "lookahead"})
    eager = make_plan("dear", trace, model, 8, knobs | {"ag_issue": "eager"})
    assert ahead.buckets == eager.buckets
    assert engine_s(trace, ahead, model, 8) >= engine_s(trace, eager, model, 8) * (1 - 1e-9)


def test_dear_planner_defaults_follow_the_reference_code() -> None:
    trace = tiny_trace([30 * MB, 10 * MB, 10 * MB, 10 * MB], [1e-3] * 4)
    model = AlphaBetaModel(1e-4, 1e-9)
    plan = make_plan("dear", trace, model, 8, {"search": "none"})
    assert plan.ag_issue == "lookahead" and plan.update == "per_layer"
    assert make_plan("dear", trace, model, 8, {"search": "none", "ag_issue": "eager"}
                     ).ag_issue == "eager"
    # dear/tuner.py L9 num_trials = 10, bound (1, 256) MiB (dopt_rsag_bo.py L101), first
    # point the configured threshold, then EI suggestions (no random points, L8).
    tuned = make_plan("dear", trace, model, 8)
    evaluated = [e["threshold_mb"] for e in tuned.info["evaluated"]]
    assert len(evaluated) == 10 and evaluated[0] == pytest.approx(25.0)
    assert all(1.0 <= x <= 256.0 for x in evaluated)
    with pytest.raises(ConfigError, match="ag_issue"):
        make_plan("dear", trace, model, 8, {"ag_issue": "early"})
