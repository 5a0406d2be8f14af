"""Gradient accumulation in real runs: 2 gloo ranks, a tiny model, k = 3 micro-batches,
with gradsched's executor, stock DDP and FSDP2 (:func:`gradsched.runtime.tasks.
accumulation_check`)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

K = 3


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    return launch("gradsched.runtime.tasks:accumulation_check", {"k": K},
                  LaunchSpec(2, op_timeout_s=60, deadline_s=240))


@pytest.mark.parametrize("kind", ["plan", "ddp", "fsdp2"])
def test_accumulated_gradient_is_the_concatenated_batch_gradient(ranks, kind) -> None:
    """Each micro-batch loss divided by k: the step's gradient, averaged over ranks, is the
    gradient of one backward on every rank's micro-batches concatenated."""
    for rank in ranks:
        assert rank[kind]["max_abs_diff"] < 1e-6


@pytest.mark.parametrize("kind", ["plan", "ddp"])
def test_only_the_last_micro_batch_all_reduces(ranks, kind) -> None:
    for rank in ranks:
        per_micro = rank[kind]["per_micro_batch"]
        assert len(per_micro) == K
        assert [m["all_reduce"] for m in per_micro[:-1]] == [0] * (K - 1)
        assert per_micro[-1]["all_reduce"] >= 1
        assert all(m["reduce_scatter"] == 0 and m["all_gather"] == 0 for m in per_micro)


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
