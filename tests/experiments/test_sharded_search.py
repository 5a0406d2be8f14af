"""The sharded optimum for models with many blocks: it answers, says how, never
beats the exhaustive optimum or the lower bound, and keeps to the memory cap; the memory
budget a GPU leaves. Traces are SYNTHETIC (tests/replay/test_sharded.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.experiments.recommend_sharded import (
    advise_sharded,
    render_sharded,
    search_notes,
)
from gradsched.experiments.sharded import search as sharded_search
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.memory import device_memory, memory_budget
from gradsched.experiments.sharded.optimum import exhaustive_optimum, optimum
from gradsched.experiments.sharded.streams import streams_optimum
from gradsched.planners.sharded import fsdp2
from gradsched.replay.sharded import replay_sharded
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.traces import ComputeTrace
from tests.replay.test_sharded import block_trace, random_block_trace

MODEL = AlphaBetaModel(2e-4, 1e-9)


def many_blocks(n: int, seed: int = 0) -> ComputeTrace:
    rng = np.random.default_rng(seed)
    trace = block_trace([list(rng.integers(1, 64, size=2) * 2**16) for _ in range(n)],
                        stem=2**20, head=2**20)
    frame = trace.frame.assign(forward_s=rng.uniform(1e-4, 2e-3, len(trace.frame)),
                               backward_s=rng.uniform(2e-4, 4e-3, len(trace.frame)))
    return ComputeTrace.from_frame(frame, trace.meta)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_search_never_beats_the_exhaustive_optimum(seed: int) -> None:
    trace = random_block_trace(seed)
    exact = exhaustive_optimum(ShardedProblem(trace, MODEL, 8))
    plan, found = streams_optimum(ShardedProblem(trace, MODEL, 8, max_prefetch=2),
                                  algorithm="s", enumerate_up_to=1)
    assert found.iteration_s >= exact.replay.iteration_s * (1 - 1e-12)
    default = replay_sharded(trace, fsdp2(trace, MODEL, 8), MODEL, 8)
    assert found.iteration_s <= default.iteration_s * (1 + 1e-12)  # the default is a seed
    assert plan.info["gap_to_bound_pct"] >= 0


def test_many_blocks_get_an_answer_that_says_how() -> None:
    trace = many_blocks(40)
    scored = optimum(ShardedProblem(trace, MODEL, 64))
    info = scored.plan.info
    assert info["method"].startswith("not exact: dynamic program (exact): reshard=True "
                                     "forward=0 backward=1, ")
    assert "; search (not exact): " in info["method"] and not info["exact"]
    assert info["methods"]["reshard=True forward=2 backward=2"] == "search (not exact)"
    assert search_notes(scored.plan)[0].startswith("the optimum is not exact: ")
    bound = sharded_lower_bound_s(trace, MODEL, 64)
    assert info["lower_bound_s"] == bound <= scored.replay.iteration_s
    assert scored.replay.iteration_s <= replay_sharded(trace, fsdp2(trace, MODEL, 64), MODEL,
                                                       64).iteration_s


def test_search_keeps_to_the_memory_cap() -> None:
    trace = many_blocks(30, seed=1)
    free = optimum(ShardedProblem(trace, MODEL, 64))
    cap = 0.5 * free.replay.gathered_peak_bytes
    capped = optimum(ShardedProblem(trace, MODEL, 64, memory_cap_bytes=cap))
    assert capped.replay.gathered_peak_bytes <= cap
    with pytest.raises(ConfigError, match="no sharded plan fits the memory cap"):
        optimum(ShardedProblem(trace, MODEL, 64, memory_cap_bytes=1.0))


def test_neighbours_are_groupings_one_move_away() -> None:
    ends = np.asarray([2, 5, 6, 9])
    found = {tuple(e.tolist()) for e in sharded_search.neighbours(ends, 9)}
    assert (1, 5, 6, 9) in found and (3, 5, 6, 9) in found  # a boundary moved
    assert (5, 6, 9) in found and (2, 6, 9) in found  # units merged
    assert (1, 2, 5, 6, 9) in found  # a unit split
    assert all(list(e) == sorted(set(e)) and e[-1] == 9 for e in found)
    assert tuple(ends.tolist()) not in found


def test_memory_budget_of_a_gpu() -> None:
    trace = many_blocks(4)
    meta = dict(trace.meta, device="NVIDIA H100 80GB HBM3")
    trace = ComputeTrace.from_frame(trace.frame, meta)
    assert device_memory("NVIDIA H100 80GB HBM3") == 80 * 2**30
    assert device_memory("h200 (modelled)") == 141e9
    assert device_memory("cpu (AMD EPYC)") is None
    budget = memory_budget(trace, 4, None)
    total = float(trace.frame["bytes"].sum())
    assert budget.shards_bytes == 2 * total / 4
    assert budget.optimizer_bytes == pytest.approx(12.0 * trace.frame["numel"].sum() / 4)
    assert budget.gathered_cap_bytes == 80 * 2**30 - budget.shards_bytes - budget.optimizer_bytes
    with pytest.raises(ConfigError, match="resident shards alone exceed"):
        memory_budget(trace, 1, 1000.0)


def test_advice_never_gathers_more_than_the_gpu_leaves() -> None:
    trace = many_blocks(20, seed=2)
    free = advise_sharded(ShardedProblem(trace, MODEL, 64, semantics="streams"), "alpha-beta")
    total = float(trace.frame["bytes"].sum())
    resident = 2 * total / 64 + 12.0 * float(trace.frame["numel"].sum()) / 64
    gpu = resident + 0.6 * free.best_replay.gathered_peak_bytes
    capped = advise_sharded(ShardedProblem(trace, MODEL, 64, semantics="streams"),
                            "alpha-beta", gpu_memory_bytes=gpu)
    assert capped.chosen is capped.best or capped.default_fits
    chosen = capped.best_replay if capped.recommend_best else capped.default_replay
    assert chosen.gathered_peak_bytes <= gpu - resident + 1e-6
    assert any(n.startswith("memory: GPU memory") for n in capped.notes)


def test_when_no_layout_fits_the_advice_says_so_and_answers() -> None:
    trace = many_blocks(20, seed=3)
    resident = (2 * float(trace.frame["bytes"].sum()) / 64
                + 12.0 * float(trace.frame["numel"].sum()) / 64)
    adv = advise_sharded(ShardedProblem(trace, MODEL, 64, semantics="streams"), "alpha-beta",
                         gpu_memory_bytes=resident + 1000.0)
    assert adv.smallest_peak_bytes is not None and not adv.recommend_best
    text = render_sharded(adv)
    assert "RECOMMENDATION: no layout of whole blocks fits" in text
    assert adv.to_dict()["recommendation"] == "none-fits"
