"""HSDP's accumulation modes run for real: stock FSDP2 on 4 gloo ranks as a 2 x 2 mesh
(2 replicas of shard groups of 2; :func:`gradsched.runtime.accum_modes.accumulation_modes`
with ``mesh``), the stack of linear layers one unit per layer, k = 1 and 4, against the
replay of the same units on that mesh (:func:`gradsched.replay.sharded_accum.
replay_mode_mesh`): the collectives of a step by kind and group size, counted at the
``torch.distributed`` calls, equal the replay's; the peak of unsharded parameters and
gradients FSDP2 held is within 10 % of the replay's ``gathered_peak_bytes``, and the
not-yet-all-reduced shards it held within 10 % of ``partial_grad_bytes``. The trace's bytes
are the model's; its times are SYNTHETIC (blocking semantics: counts and peaks do not
depend on them)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tests.runtime.test_accum_modes import BATCH, LAYERS, TOLERANCE, WIDTH, stack_trace

MODES = ("no-sync", "no-all-reduce", "sync-every")
RUNS = [(mode, k) for k in (1, 4) for mode in MODES]


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    return launch("gradsched.runtime.accum_modes:accumulation_modes",
                  {"layers": LAYERS, "width": WIDTH, "batch": BATCH, "mesh": [2, 2],
                   "allocator": False, "runs": [list(r) for r in RUNS]},
                  LaunchSpec(4, op_timeout_s=60, deadline_s=240))


def _predicted(mode: str, k: int):
    from dataclasses import replace

    from gradsched.costmodel import AlphaBetaModel
    from gradsched.costmodel.mesh_one_node import OneNodePricer
    from gradsched.plan_mesh import DeviceMeshShape
    from gradsched.replay.sharded_accum import replay_mode_mesh
    from gradsched.runtime.accum_modes import stack_plan

    plan = replace(stack_plan(LAYERS), mesh=DeviceMeshShape(2, 2))
    return replay_mode_mesh(stack_trace(), plan, OneNodePricer(AlphaBetaModel(1e-4, 1e-9), 4),
                            mode, grad_accum=k, semantics="blocking")


@pytest.mark.parametrize(("mode", "k"), RUNS)
def test_the_replay_counts_the_collectives_hsdp_issued_by_group(ranks, mode, k) -> None:
    predicted = _predicted(mode, k).collectives.to_dict()
    for rank in ranks:
        assert rank[f"{mode}-k{k}"]["by_group"] == predicted


@pytest.mark.parametrize(("mode", "k"), RUNS)
def test_the_peaks_hsdp_held_are_within_10_percent_of_the_replay(ranks, mode, k) -> None:
    predicted = _predicted(mode, k)
    for rank in ranks:
        got = rank[f"{mode}-k{k}"]
        assert got["fsdp_peak_bytes"] == pytest.approx(predicted.replay.gathered_peak_bytes,
                                                       rel=TOLERANCE)
        assert got["partial_peak_bytes"] == pytest.approx(predicted.partial_grad_bytes,
                                                          rel=TOLERANCE, abs=0)


def test_no_all_reduce_all_reduces_once_and_holds_the_reduce_scattered_shards(ranks) -> None:
    """At k = 4: four reduce-scatters per unit in the shard group of 2, one all-reduce per
    unit among the 2 replicas, and the shards of every unit's gradient kept in between (half
    the model's bytes); at k = 1 the three modes issue the same collectives."""
    from gradsched.runtime.accum_modes import stack

    grads = sum(4 * p.numel() for p in stack(LAYERS, WIDTH).parameters())
    for rank in ranks:
        four = rank["no-all-reduce-k4"]
        assert four["by_group"] == {"all_gather@2": 8 * LAYERS, "all_reduce@2": LAYERS,
                                    "reduce_scatter@2": 4 * LAYERS}
        assert four["partial_peak_bytes"] == grads // 2
        assert rank["sync-every-k4"]["by_group"]["all_reduce@2"] == 4 * LAYERS
        assert len({str(rank[f"{m}-k1"]["by_group"]) for m in MODES}) == 1
