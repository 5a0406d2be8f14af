"""The sharded replay on a device mesh (HSDP, integer resharding) and its typed plan fields:
which collective runs over which group at which size, the all-reduce channel, memory."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.costmodel.mesh import TopologyPricer, group_shape, replicate_shape
from gradsched.costmodel.topology import Topology
from gradsched.errors import ConfigError, InputError
from gradsched.plan_mesh import DeviceMeshShape, check_reshard
from gradsched.plan_sharded import ShardedPlan, fully_shard_code
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import replay_sharded
from gradsched.replay.sharded_mesh import mesh_collectives, replay_mesh
from tests.replay.test_sharded import block_trace

INTRA = AlphaBetaModel(1.0, 0.01)  # SYNTHETIC levels: the intra-node one cheaper
INTER = AlphaBetaModel(4.0, 0.04)
TOPO = Topology(2, 2, INTRA, INTER)  # 2 nodes x 2 ranks


def t(model, collective: str, nbytes: float, ranks: int) -> float:
    return float(model.times(collective, np.asarray([nbytes]), ranks)[0])


def test_group_shapes_follow_the_node_numbering() -> None:
    assert group_shape(2, 8) == (2, 1)
    assert group_shape(8, 8) == (8, 1)
    assert group_shape(32, 8) == (8, 4)
    assert replicate_shape(8, 64, 8) == (1, 8)  # one rank per node
    assert replicate_shape(32, 64, 8) == (1, 2)
    assert replicate_shape(4, 64, 8) == (2, 8)  # two replicas share a node
    with pytest.raises(ConfigError, match="divide"):
        group_shape(3, 8)
    with pytest.raises(ConfigError, match="whole nodes"):
        group_shape(12, 8)


def test_reshard_follows_fsdp2s_rules() -> None:
    """_fsdp_init.py L162-182: g must divide the shard size; g = shard is True, 1 False."""
    assert check_reshard(2, 8) == 2
    assert check_reshard(8, 8) is True
    assert check_reshard(1, 8) is False
    with pytest.raises(ConfigError, match="divides"):
        check_reshard(3, 8)


def test_hsdp_blocking_adds_intra_collectives_and_inter_all_reduces() -> None:
    """Blocking: every collective in sequence. HSDP 2 x 2: all-gathers and reduce-scatters
    of the full unit over 2 ranks of a node (intra level), then per unit and root an
    all-reduce of the shard (bytes / 2) over the 2 replicas (inter level); the update on
    the shard (1/2)."""
    trace = block_trace([[100], [300]], stem=50, update_s=4.0)
    plan = make_sharded_plan("hsdp", trace, INTRA, 4, {"shard": "2"})
    assert plan.mesh == DeviceMeshShape(2, 2)
    result = replay_mesh(trace, plan, TopologyPricer(TOPO), semantics="blocking")
    ag = {n: t(INTRA, "all_gather", n, 2) for n in (50, 100, 300)}
    rs = {n: t(INTRA, "reduce_scatter", n, 2) for n in (50, 100, 300)}
    ar = {n: t(INTER, "all_reduce", n / 2, 2) for n in (50, 100, 300)}
    comm = (ag[50] + ag[100] + ag[300] + ag[100] + ag[300]
            + sum(rs.values()) + sum(ar.values()))
    compute = 3 * 1.0 + 3 * 2.0 + 3 * 4.0 / 2  # update_s per layer, on the shard
    assert result.iteration_s == pytest.approx(compute + comm)
    assert result.n_collectives == 11
    assert result.resident_bytes == pytest.approx(2 * 450 / 2)  # shards over the shard group


def test_a_one_dimensional_mesh_is_the_plain_replay() -> None:
    """No replicas, resharding True: the hook changes nothing (the topology's hierarchical
    model over all 4 ranks)."""
    trace = block_trace([[100], [300], [200]], stem=50, update_s=1.0)
    plan = make_sharded_plan("hsdp", trace, INTRA, 4)
    plain = make_sharded_plan("fsdp2", trace, INTRA, 4)
    for semantics in ("blocking", "streams"):
        got = replay_mesh(trace, plan, TopologyPricer(TOPO), semantics=semantics)
        want = replay_sharded(trace, plain, TOPO.collective_model("hierarchical"), 4,
                              semantics=semantics)
        assert got.to_dict() == pytest.approx(want.to_dict())


def test_integer_reshard_gathers_backward_inside_the_node_and_keeps_a_slice() -> None:
    """reshard_after_forward=2 on 4 ranks: the backward all-gathers run over 2 ranks of a
    node (cheaper here), and each unit keeps bytes / 2 from its forward to that all-gather:
    faster than True, more memory than True, less than False."""
    trace = block_trace([[100], [300]], stem=50)
    pricer = TopologyPricer(TOPO)
    runs = {r: replay_mesh(trace, make_sharded_plan(
        "hsdp", trace, INTRA, 4, {"reshard_after_forward": r}), pricer, semantics="blocking")
        for r in ("true", "2", "false")}
    two_level = TOPO.collective_model("hierarchical")
    saved = sum(t(two_level, "all_gather", n, 4) - t(INTRA, "all_gather", n, 2)
                for n in (100, 300))
    assert runs["2"].iteration_s == pytest.approx(runs["true"].iteration_s - saved)
    assert runs["true"].gathered_peak_bytes < runs["2"].gathered_peak_bytes
    assert runs["2"].n_collectives == runs["true"].n_collectives


def test_streams_all_reduce_runs_beside_the_next_reduce_scatter() -> None:
    """Streams: the all-reduces run on their own channel; the step ends with the last."""
    trace = block_trace([[100], [300]], update_s=0.0)
    plan = make_sharded_plan("hsdp", trace, INTRA, 4, {"shard": "2"})
    result = replay_mesh(trace, plan, TopologyPricer(TOPO), semantics="streams")
    blocking = replay_mesh(trace, plan, TopologyPricer(TOPO), semantics="blocking")
    assert result.iteration_s < blocking.iteration_s
    assert result.iteration_s >= result.backward_end_s + t(INTER, "all_reduce", 50, 2)


def test_mesh_and_integer_reshard_round_trip_and_refusals(tmp_path) -> None:
    trace = block_trace([[100], [300]], stem=50)
    plan = make_sharded_plan("hsdp", trace, INTRA, 4, {"shard": "2"})
    path = tmp_path / "p.json"
    plan.save(path)
    assert ShardedPlan.load(path) == plan
    code = fully_shard_code(plan, trace.names)
    assert code.splitlines()[0].startswith('mesh = init_device_mesh("cuda", (2, 2)')
    assert "fully_shard(model, mesh=mesh)" in code
    data = plan.to_dict()
    data["mesh"] = {"replicate": 2}
    with pytest.raises(InputError, match="mesh"):
        ShardedPlan.from_dict(data)
    data = make_sharded_plan("hsdp", trace, INTRA, 4, {"reshard_after_forward": "2"}).to_dict()
    assert data["units"][0]["reshard_after_forward"] == 2
    data["units"][0]["reshard_after_forward"] = 1
    with pytest.raises(InputError, match="reshard_after_forward"):
        ShardedPlan.from_dict(data)
    with pytest.raises(ConfigError, match="divide"):
        make_sharded_plan("hsdp", trace, INTRA, 4, {"shard": "3"})
    with pytest.raises(ConfigError, match="reshard_after_forward"):
        make_sharded_plan("hsdp", trace, INTRA, 4, {"shard": "2", "reshard_after_forward": "4"})
    other = make_sharded_plan("hsdp", trace, INTRA, 8, {"shard": "2"})
    with pytest.raises(ConfigError, match="world size"):
        replay_mesh(trace, other, TopologyPricer(TOPO))
    assert mesh_collectives(plan, 4, has_root=False).to_dict() == {
        "all_gather@2": 4, "all_reduce@2": 2, "reduce_scatter@2": 2}


def test_the_single_mesh_paths_refuse_a_mesh_plan() -> None:
    """The plain replay prices one group of every rank, FSDP2's default mesh has no
    replicas: neither silently drops an HSDP mesh or an integer resharding."""
    trace = block_trace([[100], [300]], stem=50)
    for knobs in ({"shard": "2"}, {"reshard_after_forward": "2"}):
        plan = make_sharded_plan("hsdp", trace, INTRA, 4, knobs)
        with pytest.raises(ConfigError, match="two-level cluster"):
            replay_sharded(trace, plan, TOPO.collective_model("hierarchical"), 4)
    from torch import nn

    from gradsched.runtime.fsdp2 import apply_plan

    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    plan = ShardedPlan("h", (make_sharded_plan("fsdp2", trace, INTRA, 4).units[0],),
                       mesh=DeviceMeshShape(2, 2))
    with pytest.raises(ConfigError, match="HSDP mesh"):
        apply_plan(model, plan)
