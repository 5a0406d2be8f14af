"""``advise --sharded`` never answers without a memory check: activations counted (from a
FLOPs trace's sidecar), an assumed GPU said when none is named, the lower bound under the
cap; and its output is what a user pastes (a loop for uniform layouts, ties as ties).
Comm model and the small traces: SYNTHETIC; LLM traces: the FLOPs model (modelled)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.experiments.margin import Margin
from gradsched.experiments.recommend_sharded import (
    ShardedAdvice,
    advise_sharded,
    capped_lower_bound_s,
    paste_code,
    render_sharded,
)
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.memory import device_memory, memory_budget
from gradsched.gpus import ASSUMED_GPU, GPU_MEMORY_BYTES, GPUS
from gradsched.plan_sharded import fully_shard_code
from gradsched.planners.sharded import fsdp2
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.traces import ComputeTrace
from gradsched.traces.flops import FlopsSetting, flops_trace

MODEL = AlphaBetaModel(2e-4, 1e-9)
GIB = 2**30


@pytest.fixture(scope="module")
def llama8b() -> ComputeTrace:
    """Llama 3.1 8B at 8192 tokens, selective recomputation: 57 GiB of activations."""
    return flops_trace("llama-3.1-8b", FlopsSetting(gpu="h100", checkpointing="selective",
                                                     seq_len=8192, optimizer="adam"))


def _resident(trace: ComputeTrace, ranks: int) -> float:
    return (2.0 * trace.frame["bytes"].sum() + 12.0 * trace.frame["numel"].sum()) / ranks


def test_every_recommended_layout_fits_the_gpu_with_activations(llama8b: ComputeTrace) -> None:
    adv = advise_sharded(ShardedProblem(llama8b, MODEL, 8, semantics="streams"), "alpha-beta")
    chosen = adv.best_replay if adv.recommend_best else adv.default_replay
    activations = llama8b.meta["activation_bytes"]
    assert activations > 50 * GIB
    total = chosen.gathered_peak_bytes + _resident(llama8b, 8) + activations
    assert total <= GPU_MEMORY_BYTES["h100"] * (1 + 1e-12)
    assert any("activations 56.9" in n for n in adv.notes)


def test_without_a_known_gpu_the_assumed_one_caps_the_layouts(llama8b: ComputeTrace) -> None:
    trace = ComputeTrace.from_frame(llama8b.frame, dict(llama8b.meta, device="accelerator"))
    assert device_memory("accelerator") is None
    adv = advise_sharded(ShardedProblem(trace, MODEL, 8, semantics="streams"), "alpha-beta")
    assert adv.memory_cap_bytes == pytest.approx(
        GPUS[ASSUMED_GPU].memory_bytes - _resident(trace, 8) - trace.meta["activation_bytes"])
    assert any("ASSUMED" in n and ASSUMED_GPU in n for n in adv.notes)
    chosen = adv.best_replay if adv.recommend_best else adv.default_replay
    assert chosen.gathered_peak_bytes <= adv.memory_cap_bytes


def test_gpu_variants_are_matched_by_their_names() -> None:
    assert device_memory("NVIDIA H100 NVL") == 94e9
    assert device_memory("gh200 superchip") == 96e9
    assert device_memory("NVIDIA H100 80GB HBM3") == 80 * GIB
    assert device_memory("h200") == 141e9
    assert all(g.source and g.memory_Bps > 1e12 for g in GPUS.values())


def test_the_budget_subtracts_the_trace_s_activations(llama8b: ComputeTrace) -> None:
    budget = memory_budget(llama8b, 8, 80 * GIB)
    assert budget.activation_bytes == llama8b.meta["activation_bytes"]
    assert budget.gathered_cap_bytes == pytest.approx(
        80 * GIB - _resident(llama8b, 8) - llama8b.meta["activation_bytes"])
    assert "selective recomputation" in budget.text()


def test_the_lower_bound_counts_the_memory_cap(llama8b: ComputeTrace) -> None:
    free = sharded_lower_bound_s(llama8b, MODEL, 8)
    total = float(llama8b.frame["bytes"].sum())
    capped = capped_lower_bound_s(llama8b, MODEL, 8, total / 40)
    assert capped > free
    assert capped >= 40 * 1.5 * MODEL.startup_s("all_gather", 8)  # 40 units at least
    assert capped_lower_bound_s(llama8b, MODEL, 8, 10 * total) == free


def test_a_uniform_layout_is_pasted_as_a_loop(llama8b: ComputeTrace) -> None:
    plan = fsdp2(llama8b, MODEL, 8)
    names = tuple(llama8b.names)
    code = paste_code(plan, names)
    assert code.splitlines()[:3] == [
        "for block in model.get_submodule('model.layers'):",
        "    fully_shard(block, reshard_after_forward=True)", "fully_shard(model)"]
    assert len(code.splitlines()) == 3  # FSDP2 prefetches one block each way by itself
    assert paste_code(plan, names, full=True) == fully_shard_code(plan, names)
    assert len(fully_shard_code(plan, names).splitlines()) > 90


def test_a_non_uniform_layout_lists_its_first_units_and_points_to_plan_out(
        llama8b: ComputeTrace) -> None:
    plan = fsdp2(llama8b, MODEL, 8)
    merged = plan.units[:2]
    joined = type(merged[0])(tensors=merged[0].tensors + merged[1].tensors,
                             reshard_after_forward=True)
    units = [joined, *plan.units[2:]]
    odd = type(plan)(algorithm="x", units=units, forward_prefetch=2, backward_prefetch=1)
    code = paste_code(odd, tuple(llama8b.names))
    assert "--plan-out" in code and len(code.splitlines()) < 15
    assert "for i in range(0, 2)" not in code  # two modules are listed, not a range


def _advice(default_s: float, best_s: float) -> ShardedAdvice:
    plan = SimpleNamespace(n_units=1, forward_prefetch=1, backward_prefetch=1, mixed_precision=None,
                           units=[SimpleNamespace(reshard_after_forward=True)])
    replay = SimpleNamespace(iteration_s=default_s, gathered_peak_bytes=1.0)
    return ShardedAdvice(default=plan, default_replay=replay, best=plan,
                         best_replay=SimpleNamespace(iteration_s=best_s, gathered_peak_bytes=1.0),
                         margin=Margin(5.0, "synthetic"), semantics="streams", world_size=8,
                         memory_cap_bytes=None, names=())


def test_a_gain_within_the_tie_tolerance_is_printed_as_a_tie(monkeypatch) -> None:
    import gradsched.experiments.recommend_sharded as rs

    monkeypatch.setattr(rs, "paste_code", lambda *a: "fully_shard(model)")
    text = render_sharded(_advice(0.30994, 0.30994 * (1 - 1e-15)))
    assert "a tie" in text and "e-1" not in text
    assert "+10 %" in render_sharded(_advice(0.33, 0.30))


def test_shard_compare_flags_the_layouts_over_the_cap(llama8b: ComputeTrace) -> None:
    from gradsched.experiments.sharded.common import ShardedProblem
    from gradsched.experiments.sharded.optimum import compare

    cap = memory_budget(llama8b, 8, 80 * GIB).gathered_cap_bytes
    problem = ShardedProblem(llama8b, MODEL, 8, memory_cap_bytes=cap)
    rows = {r["algorithm"]: r for r in compare(problem,
                                               algorithms=("fsdp2", "fsdp2-noreshard"))}
    assert rows["fsdp2"]["fits_memory_cap"] is True
    assert rows["fsdp2-noreshard"]["gathered_peak_bytes"] > cap
    assert rows["fsdp2-noreshard"]["fits_memory_cap"] is False
    assert "fits_memory_cap" not in compare(ShardedProblem(llama8b, MODEL, 8),
                                             algorithms=("fsdp2",))[0]


def test_activations_that_leave_no_room_are_a_clear_error() -> None:
    from gradsched.errors import ConfigError

    trace = flops_trace("llama-3.1-70b", FlopsSetting(gpu="h100", checkpointing="none",
                                                      seq_len=8192))
    with pytest.raises(ConfigError, match="resident shards and the activations exceed"):
        memory_budget(trace, 64, None)


def test_advise_prints_a_loop_and_plan_out_the_full_listing(tmp_path, llama8b) -> None:
    """The command line: a paste-able answer on stdout, every call with --plan-out."""
    import subprocess
    import sys

    trace = flops_trace("llama-3.1-8b", FlopsSetting(gpu="h100", seq_len=1024,
                                                     checkpointing="full", optimizer="adam"))
    trace.save(tmp_path / "t.csv")
    base = [sys.executable, "-m", "gradsched", "advise", "--sharded", "--compute",
            str(tmp_path / "t.csv"), "--comm", "alpha-beta:alpha=2e-4,beta=1e-9",
            "--world-size", "8", "--margin-pct", "50"]
    short = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert short.returncode == 0, short.stderr
    assert "for block in model.get_submodule('model.layers'):" in short.stdout
    assert "model.get_submodule('model.layers.31')" not in short.stdout
    full = subprocess.run([*base, "--plan-out", str(tmp_path / "p.json")],
                          capture_output=True, text=True, timeout=300)
    assert full.returncode == 0, full.stderr
    assert "model.get_submodule('model.layers.31')" in full.stdout
    assert (tmp_path / "p.json").exists()


def test_the_capped_bound_stays_below_every_capped_optimum() -> None:
    """SYNTHETIC traces: the cap-aware bound never exceeds the best layout under the cap."""
    from gradsched.experiments.sharded.common import NoLayoutFits, ShardedProblem
    from gradsched.experiments.sharded.optimum import optimum
    from tests.experiments.test_sharded_search import many_blocks

    checked = 0
    for seed in range(3):
        trace = many_blocks(8, seed=seed)
        cap = 0.8 * optimum(ShardedProblem(trace, MODEL, 8)).replay.gathered_peak_bytes
        try:
            capped = optimum(ShardedProblem(trace, MODEL, 8, memory_cap_bytes=cap))
        except NoLayoutFits:
            continue
        checked += 1
        assert capped.replay.gathered_peak_bytes <= cap
        bound = capped_lower_bound_s(trace, MODEL, 8, cap)
        assert sharded_lower_bound_s(trace, MODEL, 8) <= bound
        assert bound <= capped.replay.iteration_s * (1 + 1e-9)
    assert checked >= 1


def test_the_advice_as_json_takes_numpy_times() -> None:
    """The replay's times are numpy floats: the JSON of ``advise --sharded --json`` must
    still be plain JSON (a numpy bool once made it fail at 1,024 ranks)."""
    import json

    import numpy as np

    plan = SimpleNamespace(to_dict=dict)
    replay = SimpleNamespace(iteration_s=np.float64(0.5), gathered_peak_bytes=1.0, to_dict=dict)
    advice = ShardedAdvice(default=plan, default_replay=replay, best=plan, best_replay=replay,
                           margin=Margin(5.0, "synthetic"), semantics="streams", world_size=8,
                           memory_cap_bytes=None, names=())
    assert json.loads(json.dumps(advice.to_dict()))["gain_is_tie"] is True
