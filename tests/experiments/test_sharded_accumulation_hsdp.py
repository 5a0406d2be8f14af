"""HSDP's accumulation modes (:func:`gradsched.replay.sharded_accum.replay_mode_mesh`,
``gradsched shard accumulate --mesh``) on the committed ResNet-18 CPU trace, every group
priced by an alpha-beta model on one node (:class:`gradsched.costmodel.mesh_one_node.
OneNodePricer`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.costmodel.mesh_one_node import OneNodePricer
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.accumulation import accumulation_rows
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.plan_mesh import DeviceMeshShape
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded_accum import replay_mode, replay_mode_mesh
from gradsched.replay.sharded_mesh import replay_mesh
from gradsched.traces.bundle import ComputeTrace

TRACE = "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
MODEL = AlphaBetaModel(1e-4, 1e-9)
PRICER = OneNodePricer(MODEL, 4)


@pytest.fixture(scope="module")
def trace() -> ComputeTrace:
    return ComputeTrace.load(TRACE)


def _plan(trace: ComputeTrace, keep: bool = False):
    plan = make_sharded_plan("fsdp2", trace, MODEL, 4)
    return replace(plan, mesh=DeviceMeshShape(2, 2), keep_unsharded_between_microbatches=keep)


def _rows(trace: ComputeTrace, k: int, semantics: str = "blocking"):
    problem = ShardedProblem(trace, MODEL, 4, semantics=semantics, grad_accum=k)
    return {r["mode"]: r for r in accumulation_rows(problem, _plan(trace), PRICER)}


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("mode", ["no-sync", "no-all-reduce", "sync-every"])
@pytest.mark.parametrize("keep", [False, True])
def test_the_counted_collectives_are_the_ones_the_replay_issued(trace, mode, k, keep) -> None:
    m = replay_mode_mesh(trace, _plan(trace, keep), PRICER, mode, grad_accum=k,
                         semantics="blocking")
    assert sum(m.collectives.counts.values()) == m.replay.n_collectives
    assert set(m.collectives.counts) <= {("all_gather", 2), ("reduce_scatter", 2),
                                         ("all_reduce", 2)}


def test_no_all_reduce_reduce_scatters_every_micro_batch_and_all_reduces_once(trace) -> None:
    one, four = _rows(trace, 1), _rows(trace, 4)
    reducing = one["sync-every"]["reduce_scatters"]
    assert one["sync-every"]["all_reduces"] == reducing
    assert four["no-all-reduce"]["reduce_scatters"] == 4 * reducing
    assert four["no-all-reduce"]["all_reduces"] == reducing
    assert four["sync-every"]["all_reduces"] == four["sync-every"]["reduce_scatters"] \
        == 4 * reducing
    assert four["no-sync"]["reduce_scatters"] == four["no-sync"]["all_reduces"] == reducing
    # blocking: each all-reduce skipped is time saved, and the memory is sync-every's
    assert four["no-sync"]["step_s"] < four["no-all-reduce"]["step_s"] \
        < four["sync-every"]["step_s"]
    assert four["no-all-reduce"]["gathered_peak_bytes"] \
        == four["sync-every"]["gathered_peak_bytes"]
    grads = float(trace.frame["bytes"].sum())
    assert four["no-all-reduce"]["partial_grad_bytes"] == pytest.approx(grads / 2, rel=1e-3)
    assert four["sync-every"]["partial_grad_bytes"] == 0
    assert one["no-all-reduce"]["partial_grad_bytes"] == 0


def test_one_micro_batch_is_one_step_in_every_mode(trace) -> None:
    one = _rows(trace, 1, "streams")
    assert set(one) == {"no-sync", "no-all-reduce", "sync-every"}
    assert len({r["step_s"] for r in one.values()}) == 1
    plain = replay_mesh(trace, _plan(trace), PRICER, semantics="streams")
    assert one["sync-every"]["step_s"] == plain.iteration_s


def test_plain_fsdp2_refuses_no_all_reduce(trace) -> None:
    plan = make_sharded_plan("fsdp2", trace, MODEL, 4)
    with pytest.raises(ConfigError, match="no all-reduce to skip"):
        replay_mode(trace, plan, MODEL, 4, "no-all-reduce", grad_accum=4)
    with pytest.raises(ConfigError, match="no all-reduce to skip"):
        replay_mode_mesh(trace, replace(plan, mesh=DeviceMeshShape(1, 4)), PRICER,
                         "no-all-reduce", grad_accum=4)


def test_the_command_prints_the_three_modes_for_hsdp(tmp_path, capsys) -> None:
    import pandas as pd

    from gradsched.cli import main

    out = tmp_path / "a.csv"
    assert main(["shard", "accumulate", "--compute", TRACE, "--comm",
                 "alpha-beta:alpha=1e-4,beta=1e-9", "--world-size", "4", "--grad-accum", "4",
                 "--mesh", "2x2", "--semantics", "blocking", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "HSDP 2 x 2" in text and "not priced" not in text
    frame = pd.read_csv(out)
    assert list(frame["mode"]) == ["no-sync", "no-sync-keep", "no-all-reduce", "sync-every"]
    assert set(frame["replicate"]) == {2}
    assert main(["shard", "accumulate", "--compute", TRACE, "--comm",
                 "alpha-beta:alpha=1e-4,beta=1e-9", "--world-size", "4", "--mesh", "3x2"]) == 2


def test_the_mesh_option_refuses_what_it_cannot_use(tmp_path, capsys) -> None:
    """A mesh not spelt RxS, or not the plan's own mesh: a one-line refusal (exit 2)."""
    from gradsched.cli import main
    from gradsched.planners.sharded.hsdp import hsdp

    base = ["shard", "accumulate", "--compute", TRACE, "--comm",
            "alpha-beta:alpha=1e-4,beta=1e-9", "--world-size", "4"]
    with pytest.raises(SystemExit) as bad:
        main([*base, "--mesh", "2by2"])
    assert bad.value.code == 2 and "expected RxS" in capsys.readouterr().err
    plan = tmp_path / "hsdp.json"
    hsdp(ComputeTrace.load(TRACE), MODEL, 4, shard=2).save(plan)
    assert main([*base, "--plan", str(plan), "--mesh", "1x4"]) == 2
    assert "differs from the plan's mesh 2x2" in capsys.readouterr().err
    assert main([*base, "--plan", str(plan), "--grad-accum", "2"]) == 0  # its own mesh
    assert "no-all-reduce" in capsys.readouterr().out
