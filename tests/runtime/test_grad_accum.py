"""Gradient accumulation in real runs: 2 gloo ranks, a tiny model, k = 3 micro-batches,
with gradsched's executor, stock DDP, FSDP2 and ZeRO-1 (torch's ZeroRedundancyOptimizer,
with and without overlap_with_ddp) (:func:`gradsched.runtime.accum_check.
accumulation_check`)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

K = 3


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    return launch("gradsched.runtime.accum_check:accumulation_check", {"k": K},
                  LaunchSpec(2, op_timeout_s=60, deadline_s=240))


@pytest.mark.parametrize("kind", ["plan", "ddp", "fsdp2", "zero1", "zero1-overlap"])
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
