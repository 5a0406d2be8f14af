"""The accumulation-mode advisor (:mod:`gradsched.experiments.sharded.accumulation`,
:mod:`gradsched.replay.sharded_accum`, ``gradsched shard accumulate``) on the committed
ResNet-18 CPU trace and an alpha-beta model."""

from __future__ import annotations

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.accumulation import accumulation_rows, advice
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded_accum import check_mode, replay_mode
from gradsched.traces.bundle import ComputeTrace

TRACE = "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
MODEL = AlphaBetaModel(1e-4, 1e-9)


@pytest.fixture(scope="module")
def trace() -> ComputeTrace:
    return ComputeTrace.load(TRACE)


def _rows(trace: ComputeTrace, k: int, semantics: str = "streams", cap: float | None = None):
    plan = make_sharded_plan("fsdp2", trace, MODEL, 4)
    problem = ShardedProblem(trace, MODEL, 4, semantics=semantics, grad_accum=k,
                             memory_cap_bytes=cap)
    return {r["mode"]: r for r in accumulation_rows(problem, plan)}


@pytest.mark.parametrize("semantics", ["streams", "blocking"])
def test_sync_every_reduce_scatters_k_times_and_keeps_one_micro_batch_of_memory(
        trace, semantics) -> None:
    one, four = _rows(trace, 1, semantics), _rows(trace, 4, semantics)
    assert four["sync-every"]["reduce_scatters"] == 4 * four["no-sync"]["reduce_scatters"]
    assert four["sync-every"]["all_gathers"] == four["no-sync"]["all_gathers"] \
        == 4 * one["no-sync"]["all_gathers"]
    assert four["sync-every"]["gathered_peak_bytes"] == one["sync-every"]["gathered_peak_bytes"]
    assert four["no-sync"]["gathered_peak_bytes"] > four["sync-every"]["gathered_peak_bytes"]
    assert four["sync-every"]["step_s"] > four["no-sync"]["step_s"]


def test_skipping_sync_grows_the_peak_by_at_most_the_unsharded_gradients(trace) -> None:
    four = _rows(trace, 4)
    grads = float(trace.frame["bytes"].sum())
    assert 0 < four["no-sync"]["extra_peak_bytes"] <= grads


def test_with_one_micro_batch_the_modes_are_one_step(trace) -> None:
    one = _rows(trace, 1)
    assert set(one) == {"no-sync", "sync-every"}  # nothing to keep between micro-batches
    assert one["no-sync"]["step_s"] == one["sync-every"]["step_s"]
    assert "the same step" in advice(list(one.values()))


def test_the_advice_is_the_fastest_mode_within_the_cap(trace) -> None:
    free = _rows(trace, 4)
    fastest = min(free.values(), key=lambda r: r["step_s"])["mode"]
    assert advice(list(free.values())).startswith(f"fastest: {fastest} ")
    capped = _rows(trace, 4, cap=free["sync-every"]["gathered_peak_bytes"])
    assert not capped["no-sync"]["fits_cap"] and capped["sync-every"]["fits_cap"]
    assert "within the cap: sync-every" in advice(list(capped.values()))
    tiny = _rows(trace, 4, cap=1.0)
    assert advice(list(tiny.values())).startswith("no mode fits")


def test_no_all_reduce_needs_a_replicate_dimension(trace) -> None:
    with pytest.raises(ConfigError, match="replicate dimension"):
        check_mode("no-all-reduce")
    with pytest.raises(ConfigError, match="one of"):
        replay_mode(trace, make_sharded_plan("fsdp2", trace, MODEL, 2), MODEL, 2, "bogus",
                    grad_accum=2)


def test_the_command_prints_the_modes_and_writes_the_table(tmp_path, capsys) -> None:
    import pandas as pd

    from gradsched.cli import main

    out = tmp_path / "a.csv"
    assert main(["shard", "accumulate", "--compute", TRACE, "--comm",
                 "alpha-beta:alpha=1e-4,beta=1e-9", "--world-size", "2", "--grad-accum", "4",
                 "--memory-cap", "30M", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "no-sync-keep" in text and "not priced: no-all-reduce" in text
    frame = pd.read_csv(out)
    assert list(frame["mode"]) == ["no-sync", "no-sync-keep", "sync-every"]


def test_modes_within_the_margin_are_not_told_apart():
    """SYNTHETIC rows: a 1 % faster mode with twice the peak is not preferred over the
    leanest one when the comm model's margin is 5 %; at 0.5 % it is."""
    rows = [{"mode": m, "grad_accum": 4, "step_s": s, "gathered_peak_bytes": b,
             "fsdp2_calls": m}
            for m, s, b in (("no-sync", 1.00, 2 << 20), ("sync-every", 1.01, 1 << 20))]
    assert advice(rows).startswith("fastest: no-sync ")
    assert advice(rows, 0.5).startswith("fastest: no-sync ")
    told = advice(rows, 5.0)
    assert "not told apart" in told and "least memory among them: sync-every" in told


def test_equal_peaks_within_the_margin_are_a_tie():
    """SYNTHETIC rows: two modes within the margin with the same peak are a tie on memory,
    not a winner; FSDP2's default is named among them (nothing to call), the other as tied,
    whatever order the rows come in and whichever is faster by a hair."""
    rows = [{"mode": m, "grad_accum": 4, "step_s": s, "gathered_peak_bytes": b,
             "fsdp2_calls": m}
            for m, s, b in (("no-sync", 1.00, 2 << 20), ("no-all-reduce", 1.001, 1 << 20),
                            ("sync-every", 1.002, 1 << 20))]
    for ordered in (rows, rows[::-1]):
        told = advice(ordered, 5.0)
        assert "least memory among them: sync-every (tied on memory with no-all-reduce)" in told
