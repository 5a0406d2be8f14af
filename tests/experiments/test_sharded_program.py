"""The dynamic programs of the sharded optimum (streams semantics) against exhaustion: the
same replayed iteration within :data:`gradsched.ties.RTOL`, never over the memory cap, the
same error when nothing fits; a planted off-by-one in its recurrence is caught. Traces are
SYNTHETIC (random blocks, root layers before, between and after them), except ResNet-18's
committed CPU trace."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.costmodel.base import AlphaBetaModel, CommModel, load_comm_spec
from gradsched.experiments.sharded import kept as sk
from gradsched.experiments.sharded import program as sp
from gradsched.experiments.sharded import streams
from gradsched.experiments.sharded.candidates import (
    LayoutScorer,
    block_level,
    every_grouping,
    settings,
)
from gradsched.experiments.sharded.common import NoLayoutFits, ShardedProblem
from gradsched.experiments.sharded.optimum import exhaustive_optimum
from gradsched.ties import same_time
from gradsched.traces import ComputeTrace
from gradsched.traces.layers import block_ranges, layer_seq
from tests.replay.test_sharded import META

REPO = Path(__file__).resolve().parents[2]
P = 8


def synthetic_case(seed: int) -> tuple[ComputeTrace, CommModel]:
    """SYNTHETIC: 1-12 blocks of 1-2 layers, root layers before, after and (one case in
    four) between blocks, random compute, bytes and alpha-beta network."""
    rng = np.random.default_rng(seed)
    n_blocks = int(rng.integers(1, 13)) if seed % 3 == 0 else int(rng.integers(1, 8))
    rows: list[tuple[str, int]] = []
    if rng.random() < 0.6:
        rows.append(("stem.weight", int(rng.integers(1, 64)) * 2**14))
    between = rng.random() < 0.25
    for b in range(n_blocks):
        rows += [(f"blocks.{b}.l{i}.weight", int(rng.integers(1, 64)) * 2**14)
                 for i in range(int(rng.integers(1, 3)))]
        if between and b < n_blocks - 1 and rng.random() < 0.5:
            rows.append((f"norm{b}.weight", int(rng.integers(1, 8)) * 2**12))
    if rng.random() < 0.6:
        rows.append(("head.weight", int(rng.integers(1, 64)) * 2**14))
    n = len(rows)
    frame = {"name": [r[0] for r in rows], "layer": range(n), "numel": [r[1] for r in rows],
             "bytes": [r[1] for r in rows], "forward_s": rng.uniform(0, 2e-3, n),
             "backward_s": rng.uniform(0, 4e-3, n), "update_s": rng.uniform(0, 1e-3, n),
             "ready_order": list(range(n))[::-1]}
    trace = ComputeTrace.from_frame(pd.DataFrame(frame), META)
    return trace, AlphaBetaModel(10 ** rng.uniform(-5, -3), 10 ** rng.uniform(-10, -8))


def disagreements(trace: ComputeTrace, model: CommModel, max_prefetch: int,
                  cap_quantile: float | None, world: int = P) -> list[str]:
    """For each setting a program solves exactly under the cap (a quantile of the peaks of
    every grouping under that setting; None: no cap): whether its grouping, replayed, is as
    fast as the fastest of every grouping and fits the cap. Empty when they agree."""
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    level = block_level(seq, blocks, ShardedProblem(trace, model, world).sizes)
    t = sp.tables(*level, model, world) if sp.window_applies(seq, blocks) else None
    problems = []
    for setting in settings(max_prefetch):
        if setting[1] > 1 or (setting[0] and setting[2] > 1):
            continue  # never a program's
        scorer = LayoutScorer(ShardedProblem(trace, model, world), *level)
        keys = [scorer.score(ends, setting)[0] for ends in every_grouping(len(blocks))]
        peaks = sorted(k[2] for k in keys)
        cap = math.inf if cap_quantile is None else \
            peaks[int(cap_quantile * (len(peaks) - 1))]
        if setting not in streams.exact_settings(t, max_prefetch, cap):
            continue
        fits = [k[0] for k in keys if k[2] <= cap]
        ends = streams.solve(t, setting, cap, 0.0)  # type: ignore[arg-type]
        if ends is None:
            if fits:
                problems.append(f"{setting}: the program finds nothing under {cap!r}")
            continue
        key = scorer.score(np.asarray(ends, dtype=np.int64), setting)[0]
        if not fits or not same_time(key[0], min(fits)) or key[2] > cap:
            problems.append(f"{setting}: program {key[0]!r} s peak {key[2]!r}, "
                            f"exhaustion {min(fits, default=None)!r} s (cap {cap!r})")
    return problems


SEEDS = range(60)


@pytest.mark.parametrize("max_prefetch", [1, 2])
def test_program_equals_exhaustion_per_setting(max_prefetch: int) -> None:
    solved = 0
    for seed in SEEDS:
        trace, model = synthetic_case(seed)
        quantile = (None, 0.0, 0.3, 0.7)[seed % 4]
        assert disagreements(trace, model, max_prefetch, quantile) == [], seed
        seq = layer_seq(trace)
        solved += sp.window_applies(seq, block_ranges(seq))
    assert solved >= 40  # the rest have root layers between blocks: not the programs''


def test_a_planted_off_by_one_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous unit's all-gather replaced by the unit's own in the window program, and
    the next unit's compute by the unit's own in the kept program's lag (window indices
    shifted by one): the comparison that passes above must see each."""
    window, lag = sp.backward_term, sk.lag_step

    def shifted_window(t: sp.Tables, a: np.ndarray, b: np.ndarray, c: int,
                       d: np.ndarray) -> np.ndarray:
        first = (a == sp.PAD - 1) & (b == sp.PAD)
        return np.where(first, window(t, a, b, c, d),
                        np.maximum(t.bwd[b, c], t.rs[c, d] + t.ag[b, c]))

    def shifted_lag(t: sp.Tables, a: int, b: int, c: int, h: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, t.rs[b, c] - t.bwd[b, c] + h)

    for name, module, planted in (("backward_term", sp, shifted_window),
                                  ("lag_step", sk, shifted_lag)):
        with monkeypatch.context() as patch:
            patch.setattr(module, name, planted)
            caught = [seed for seed in SEEDS[:30]
                      if disagreements(*synthetic_case(seed), 1, None)]
        assert len(caught) >= 3, name
    assert sp.backward_term is window and sk.lag_step is lag


def assert_same_optimum(trace: ComputeTrace, model: CommModel, world: int, max_prefetch: int,
                        cap: float | None) -> None:
    """The streams optimum (enumerating only what no program covers) against the exhaustive
    optimum: the same time, within the cap, or both find that nothing fits."""
    def ours() -> tuple:
        problem = ShardedProblem(trace, model, world, memory_cap_bytes=cap,
                                 max_prefetch=max_prefetch)
        return streams.streams_optimum(problem, algorithm="dp", enumerate_up_to=2**15)
    try:
        want = exhaustive_optimum(ShardedProblem(trace, model, world, memory_cap_bytes=cap,
                                                 max_prefetch=max_prefetch))
    except NoLayoutFits:
        with pytest.raises(NoLayoutFits):
            ours()
        return
    plan, got = ours()
    assert same_time(got.iteration_s, want.replay.iteration_s)
    assert cap is None or got.gathered_peak_bytes <= cap
    assert plan.info["exact"] and plan.info["gap_to_bound_pct"] >= 0


@pytest.mark.parametrize("seed", range(8))
def test_program_optimum_equals_the_exhaustive_optimum(seed: int) -> None:
    trace, model = synthetic_case(1000 + seed)
    max_prefetch = 1 + seed % 2
    free = exhaustive_optimum(ShardedProblem(trace, model, P, max_prefetch=max_prefetch))
    for cap in (None, 0.8 * free.replay.gathered_peak_bytes, 1.0):
        assert_same_optimum(trace, model, P, max_prefetch, cap)


def test_on_resnet18s_trace() -> None:
    trace = ComputeTrace.load(REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv")
    model = load_comm_spec(REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv")
    seq = layer_seq(trace)
    assert sp.window_applies(seq, block_ranges(seq))  # stem and head only
    for cap in (None, 0.0):
        assert disagreements(trace, model, 2, cap, world=2) == []
    for max_prefetch in (1, 2):
        free = exhaustive_optimum(ShardedProblem(trace, model, 2, max_prefetch=max_prefetch))
        for share in (None, 1.0, 0.95, 0.8):
            cap = None if share is None else share * free.replay.gathered_peak_bytes
            assert_same_optimum(trace, model, 2, max_prefetch, cap)


def test_beyond_enumeration_the_plan_says_which_setting_was_searched() -> None:
    trace, model = synthetic_case(3)  # no root layers between blocks
    plan, _ = streams.streams_optimum(ShardedProblem(trace, model, P, max_prefetch=2),
                                      algorithm="dp", enumerate_up_to=1)
    methods = plan.info["methods"]
    assert methods["reshard=True forward=1 backward=1"] == streams.EXACT
    assert methods["reshard=False forward=1 backward=2"] == streams.EXACT
    assert methods["reshard=True forward=2 backward=2"] == streams.SEARCHED
    assert not plan.info["exact"] and plan.info["method"].startswith("not exact: ")
