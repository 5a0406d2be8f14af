"""HSDP and integer resharding run for real: stock FSDP2 on 4 gloo ranks as 2 nodes x 2
(the emulated cluster with root; loopback without), forming the plan's mesh, and issuing
exactly the collectives, by kind and group size, that the replay prices
(:func:`gradsched.replay.sharded_mesh.mesh_collectives`)."""

from __future__ import annotations

import os

import pytest

from gradsched.plan_mesh import DeviceMeshShape
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.replay.sharded_mesh import mesh_collectives
from tests.netns_support import needs_netns, ours

TASK = "gradsched.runtime.mesh_run:fsdp2_mesh_step"
L0, L2 = ("0.weight", "0.bias"), ("2.weight", "2.bias")  # tiny-mlp; "4" stays in the root
PLANS = [
    ShardedPlan("hsdp", (Unit(L0), Unit(L2)), forward_prefetch=1, backward_prefetch=1,
                mesh=DeviceMeshShape(2, 2)),
    ShardedPlan("reshard-to-2", (Unit(L0, 2), Unit(L2, 2)), forward_prefetch=1,
                backward_prefetch=1, mesh=DeviceMeshShape(1, 4)),
]
PAYLOAD = {"plans": [p.to_dict() for p in PLANS], "model": "tiny-mlp", "batch_size": 4,
           "iters": 2}


def check(results: list[list[dict]], node_of=lambda r: r // 2) -> None:
    """Every rank formed the planned mesh (group sizes; a shard group inside a node, a
    replicate group across nodes), the plan's units, and issued the planned collectives."""
    for rank, per_plan in enumerate(results):
        for plan, got in zip(PLANS, per_plan, strict=True):
            mesh = plan.mesh
            assert len(got["groups"]["shard"]) == mesh.shard
            assert rank in got["groups"]["shard"]
            if mesh.is_hsdp:
                assert len(got["groups"]["replicate"]) == mesh.replicate
                assert {node_of(r) for r in got["groups"]["shard"]} == {node_of(rank)}
                assert len({node_of(r) for r in got["groups"]["replicate"]}) == mesh.replicate
            assert got["units"] == [sorted(u.tensors) for u in plan.units]
            assert got["collectives"] == mesh_collectives(plan, 4, has_root=True).to_dict()
    hsdp, reshard = (results[0][i]["collectives"] for i in range(2))
    assert hsdp["all_reduce@2"] == 3 and "all_gather@4" not in hsdp
    assert reshard["all_gather@2"] == 2 and reshard["all_gather@4"] == 3


def test_planned_collectives_are_the_replays() -> None:
    """The counts the real runs are checked against, written out: HSDP 2 x 2 gathers and
    reduce-scatters inside the shard group of 2 and all-reduces every unit's and the root's
    shard among the 2 replicas; reshard_after_forward=2 on 4 ranks gathers forward over 4
    and backward over 2."""
    assert mesh_collectives(PLANS[0], 4, True).to_dict() == {
        "all_gather@2": 5, "all_reduce@2": 3, "reduce_scatter@2": 3}
    assert mesh_collectives(PLANS[1], 4, True).to_dict() == {
        "all_gather@2": 2, "all_gather@4": 3, "reduce_scatter@4": 3}


@pytest.mark.slow
def test_fsdp2_forms_the_mesh_and_its_collectives_on_loopback() -> None:
    """4 gloo ranks on loopback, numbered as 2 nodes x 2 (ranks 0-1, 2-3)."""
    from gradsched.distributed.launch import LaunchSpec, launch

    check(launch(TASK, PAYLOAD, LaunchSpec(world_size=4, op_timeout_s=60, deadline_s=180)))


@pytest.mark.network
@needs_netns
@pytest.mark.slow
def test_fsdp2_forms_the_mesh_on_the_emulated_two_node_cluster() -> None:
    """The same in the emulated cluster: two node namespaces of 2 ranks, the link between
    them shaped (HSDP's shard groups stay inside a node, its all-reduces cross it)."""
    from gradsched.distributed.cluster import EmulatedCluster
    from gradsched.distributed.launch import launch

    prefix = f"gsm{os.getpid()}-"
    with EmulatedCluster(4, "1gbit", prefix=prefix, ranks_per_node=2) as cluster:
        results = launch(TASK, PAYLOAD, cluster.launch_spec(op_timeout_s=60, deadline_s=180))
        check(results, cluster.layout.node_of)
    assert ours(prefix) == []
