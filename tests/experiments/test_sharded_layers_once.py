"""One sharded problem derives its layers and blocks from the trace once
(``gradsched.traces.layers``): ``advise --sharded`` and ``shard compare`` on a committed
compute trace (GPT-2, measured on an H200) with the committed GB300 all-gather sweep run every
planner, replay, bound and domain note of the problem on one :class:`LayerSeq` and one list of
blocks. The entries into ``layer_seq``/``block_ranges`` are cache look-ups; the counts here
are of the computations behind them (before this test, ``block_ranges`` was computed 4 times
by ``advise --sharded`` and 10 times by ``shard compare`` on this case)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gradsched.costmodel.base import load_comm_spec
from gradsched.experiments.recommend_sharded import advise_sharded, sharded_notes
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import compare
from gradsched.traces import layers
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import block_ranges, layer_seq

ROOT = Path(__file__).resolve().parents[2]
COMPUTE = ROOT / "traces/compute/h200/gpt2-s1024-b8-cuda-bf16.csv"
COMM = ROOT / "traces/comm/external/nccl-gcp-a4xmax-2x4-gb300-allgather.csv"
COMPUTED = ("_layer_seq", "_block_ranges")


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts the calls of the functions of ``traces/layers.py`` that compute (behind the
    cached entries ``layer_seq`` and ``block_ranges``)."""
    seen: Counter = Counter()
    for name in COMPUTED:
        compute = getattr(layers, name)

        def counted(*args, _name=name, _compute=compute):
            seen[_name] += 1
            return _compute(*args)

        monkeypatch.setattr(layers, name, counted)
    return seen


def _problem(**kw) -> ShardedProblem:
    trace = ComputeTrace.load(COMPUTE)  # a fresh trace: nothing cached on it yet
    return ShardedProblem(trace, load_comm_spec(str(COMM)), 8, **kw)


def test_advise_sharded_computes_the_layers_and_blocks_once(counts: Counter) -> None:
    problem = _problem(grad_accum=2, memory_cap_bytes=300 * 2**20)
    advise_sharded(problem, str(COMM))
    assert counts == {"_layer_seq": 1, "_block_ranges": 1}
    assert problem.seq is layer_seq(problem.trace)
    assert problem.blocks == block_ranges(problem.seq) and len(problem.blocks) == 12


def test_shard_compare_computes_the_layers_and_blocks_once(counts: Counter) -> None:
    problem = _problem()
    plans: dict = {}
    compare(problem, plans=plans)
    sharded_notes(problem.trace, problem.model, 8, str(COMM), list(plans.items()))
    assert len(plans) > 5  # every sharded planner and the optimum
    assert counts == {"_layer_seq": 1, "_block_ranges": 1}


def test_a_cached_block_list_is_not_shared_with_callers() -> None:
    seq = layer_seq(ComputeTrace.load(COMPUTE))
    first = block_ranges(seq)
    first.clear()
    assert len(block_ranges(seq)) == 12
