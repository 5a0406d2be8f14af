"""Gradient accumulation in real runs: 2 gloo ranks, a tiny model, k = 3 micro-batches,
with gradsched's executor, stock DDP, FSDP2 and ZeRO-1 (torch's ZeroRedundancyOptimizer,
with and without overlap_with_ddp) (:func:`gradsched.runtime.accum_check.
accumulation_check`); FSDP2 also with the parameters kept unsharded between micro-batches
(set_reshard_after_backward(False)), its all-gathers counted against the sharded replay's
(a SYNTHETIC trace of the same two units)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

K = 3


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    return launch("gradsched.runtime.accum_check:accumulation_check", {"k": K},
                  LaunchSpec(2, op_timeout_s=60, deadline_s=240))


@pytest.mark.parametrize("kind", ["plan", "ddp", "fsdp2", "fsdp2-noreshard", "fsdp2-keep",
                                  "fsdp2-keep-noreshard", "zero1", "zero1-overlap"])
def test_accumulated_gradient_is_the_concatenated_batch_gradient(ranks, kind) -> None:
    """Each micro-batch loss divided by k: the step's gradient, averaged over ranks, is the
    gradient of one backward on every rank's micro-batches concatenated."""
    for rank in ranks:
        assert rank[kind]["max_abs_diff"] < 1e-6


@pytest.mark.parametrize("kind", ["plan", "ddp", "zero1", "zero1-overlap"])
def test_only_the_last_micro_batch_all_reduces(ranks, kind) -> None:
    for rank in ranks:
        per_micro = rank[kind]["per_micro_batch"]
        assert len(per_micro) == K
        assert [m["all_reduce"] for m in per_micro[:-1]] == [0] * (K - 1)
        assert per_micro[-1]["all_reduce"] >= 1
        assert all(m["reduce_scatter"] == 0 and m["all_gather"] == 0 for m in per_micro)


@pytest.mark.parametrize("kind", ["zero1", "zero1-overlap"])
def test_zero1_steps_once_per_step_on_the_accumulated_gradient(ranks, kind) -> None:
    """ZeRO-1 under accumulation: no broadcast in the k - 1 silent micro-batches, the
    parameter broadcasts once per step (in step() after the last backward, or with
    overlap_with_ddp inside that backward's comm hook), and the update is SGD's on the
    concatenated batch's gradient."""
    for rank in ranks:
        record = rank[kind]
        per_micro, step = record["per_micro_batch"], record["step"]
        assert [m["broadcast"] for m in per_micro[:-1]] == [0] * (K - 1)
        broadcasts = per_micro[-1]["broadcast"] + step["broadcast"]
        if kind == "zero1":  # one broadcast per parameter (4), from its owner, in step()
            assert per_micro[-1]["broadcast"] == 0 and step["broadcast"] == 4
        else:  # one per DDP bucket (1 here), in the last bucket's hook
            assert step["broadcast"] == 0 and broadcasts == 1
        assert step["all_reduce"] == 0
        assert record["update_diff"] < 1e-6
    assert ranks[0][kind]["update_diff"] == ranks[1][kind]["update_diff"]


def test_fsdp2_gathers_every_micro_batch_and_reduce_scatters_on_the_last(ranks) -> None:
    for rank in ranks:
        per_micro = rank["fsdp2"]["per_micro_batch"]
        assert len(per_micro) == K
        assert [m["reduce_scatter"] for m in per_micro[:-1]] == [0] * (K - 1)
        assert per_micro[-1]["reduce_scatter"] >= 2  # one per unit (and the root's, if any)
        gathers = [m["all_gather"] for m in per_micro]
        # resharded after forward: a forward and a backward all-gather per unit, every
        # micro-batch, sync or not (FSDP2 reshards after backward even without sync)
        assert min(gathers) >= 4 and len(set(gathers)) == 1
        assert all(m["all_reduce"] == 0 for m in per_micro)


GATHERS = {"fsdp2": [4, 4, 4], "fsdp2-noreshard": [2, 2, 2], "fsdp2-keep": [4, 2, 2],
           "fsdp2-keep-noreshard": [2, 0, 0]}
"""All-gathers per micro-batch (k = 3, two units, no root parameters): resharded after
forward, a forward and a backward one per unit; kept unsharded between micro-batches, no
forward one after the first micro-batch (a unit resharded after forward still gathers in
every backward)."""


@pytest.mark.parametrize("kind", list(GATHERS))
def test_keeping_parameters_unsharded_drops_the_later_forward_all_gathers(ranks, kind) -> None:
    for rank in ranks:
        record = rank[kind]
        assert [m["all_gather"] for m in record["per_micro_batch"]] == GATHERS[kind]
        assert [m["reduce_scatter"] for m in record["per_micro_batch"]] == [0] * (K - 1) + [2]
        assert record["sharded_after_step"]  # the last backward reshards every unit


@pytest.mark.parametrize("kind", list(GATHERS))
def test_the_sharded_replay_counts_the_collectives_fsdp2_issued(ranks, kind) -> None:
    """The replay of the same two units (a SYNTHETIC trace of the model's layers, no root)
    issues per step the all-gathers and reduce-scatters FSDP2 issued for real."""
    import pandas as pd

    from gradsched.costmodel import AlphaBetaModel
    from gradsched.plan_sharded import ShardedPlan, Unit
    from gradsched.replay.sharded import replay_sharded
    from gradsched.traces import ComputeTrace
    from tests.replay.test_sharded import META

    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    frame = pd.DataFrame({"name": names, "layer": [0, 0, 1, 1], "numel": [48, 8, 24, 3],
                          "bytes": [192, 32, 96, 12], "forward_s": 1e-4, "backward_s": 2e-4,
                          "update_s": 0.0, "ready_order": [3, 2, 1, 0]})
    trace = ComputeTrace.from_frame(frame, META)
    reshard = kind in ("fsdp2", "fsdp2-keep")
    plan = ShardedPlan("accum", (Unit(tuple(names[:2]), reshard), Unit(tuple(names[2:]), reshard)),
                       keep_unsharded_between_microbatches=kind.startswith("fsdp2-keep"))
    replayed = replay_sharded(trace, plan, AlphaBetaModel(1e-4, 1e-9), 2, semantics="blocking",
                              grad_accum=K)
    issued = sum(m["all_gather"] + m["reduce_scatter"]
                 for m in ranks[0][kind]["per_micro_batch"])
    assert replayed.n_collectives == issued == sum(GATHERS[kind]) + 2
