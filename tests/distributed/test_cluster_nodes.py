"""Emulated cluster with several ranks per node (distributed/cluster.py, ``ranks_per_node``).

Pure layout checks run anywhere. With root: 2 nodes x 2 ranks build one namespace per
node (plus the switch) and vanish afterwards; traffic between the two ranks of a node is
not shaped while traffic between nodes is (measured with point-to-point sends); a crashed
rank still tears everything down; and a hierarchical all-reduce plan (the node layout
taken from ``LOCAL_WORLD_SIZE``, which the cluster sets) trains exactly there.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time

import pytest

from gradsched.distributed import cluster_record
from gradsched.distributed.cluster import ClusterLayout, EmulatedCluster
from gradsched.errors import ConfigError
from tests.netns_support import needs_netns, ours

network = pytest.mark.network


@pytest.fixture
def prefix(request):
    name = f"gsn{os.getpid()}{request.node.name[-5:].replace('_', '')}-"
    yield name
    assert ours(name) == [], "namespaces left behind"
    assert not cluster_record.record_path(name).exists(), "record left behind"


def test_node_layout_names():
    lay = ClusterLayout(4, "x-", 2)
    assert lay.nodes == 2
    assert lay.namespaces == ["x-sw", "x-r0", "x-r1"]
    assert lay.links("x-sw") == ["br0", "r0", "r1"]
    assert [lay.node_of(r) for r in range(4)] == [0, 0, 1, 1]
    one = ClusterLayout(3, "y-")
    assert one.namespaces == ["y-sw", "y-r0", "y-r1", "y-r2"]  # one rank per node: as before


def test_rank_prefixes_and_env():
    c = EmulatedCluster(4, "1gbit", prefix="z-", ranks_per_node=2)
    assert [c.prefix_for(r)[-1] for r in range(4)] == ["z-r0", "z-r0", "z-r1", "z-r1"]
    assert c.rank_env(3)["LOCAL_WORLD_SIZE"] == "2"
    assert "LOCAL_WORLD_SIZE" not in EmulatedCluster(2, "1gbit", prefix="w-").rank_env(0)
    assert "2 node namespaces x 2 ranks" in c.describe()


@pytest.mark.parametrize("per_node", [0, 3])
def test_ranks_must_split_into_nodes(per_node):
    with pytest.raises(ConfigError, match="ranks per node"):
        EmulatedCluster(4, "1gbit", prefix="v-", ranks_per_node=per_node)


@network
@needs_netns
def test_node_namespaces_built_and_removed(prefix):
    with EmulatedCluster(4, "100mbit", prefix=prefix, ranks_per_node=2) as c:
        assert sorted(ours(prefix)) == sorted(c.layout.namespaces)
        assert len(ours(prefix)) == 3
        ports = subprocess.run(["tc", "-n", c.layout.switch, "qdisc", "show"],
                               capture_output=True, text=True, check=True).stdout
        assert ports.count("tbf") == 2  # one shaped port per node
    assert ours(prefix) == []


@network
@needs_netns
@pytest.mark.slow
def test_intra_node_unshaped_inter_node_shaped(prefix):
    pytest.importorskip("torch")
    from gradsched.distributed import launch

    nbytes, rate = 2_000_000, 100e6
    with EmulatedCluster(4, "100mbit", prefix=prefix, ranks_per_node=2) as c:
        res = launch("gradsched.runtime.tasks:p2p_link_times",
                     {"bytes": nbytes, "peers": [1, 2], "iters": 3},
                     c.launch_spec(op_timeout_s=60, deadline_s=120))
    times = res[0]["times_s"]
    intra, inter = statistics.median(times["1"]), statistics.median(times["2"])
    wire = nbytes * 8 / rate  # 0.16 s at the shaped rate
    assert inter >= 0.8 * wire, times
    assert inter < 1.5 * wire, times
    assert intra < 0.25 * wire, times  # loopback inside the node: not shaped


@network
@needs_netns
@pytest.mark.slow
def test_crashed_rank_in_a_node_tears_down(prefix):
    pytest.importorskip("torch")
    from gradsched.distributed import DistributedError, launch

    start = time.monotonic()
    with pytest.raises(DistributedError, match=re.escape("rank 3 of 4")), \
            EmulatedCluster(4, "1gbit", prefix=prefix, ranks_per_node=2) as c:
        launch("gradsched.distributed.tasks:die_on_rank", {"victim": 3},
               c.launch_spec(op_timeout_s=20, deadline_s=60))
    assert time.monotonic() - start < 60


@network
@needs_netns
@pytest.mark.slow
def test_hierarchical_plan_is_exact_on_2x2_nodes(prefix):
    torch = pytest.importorskip("torch")
    from gradsched.distributed import launch
    from gradsched.plan import Bucket, Plan
    from gradsched.runtime.reference import make_test_model, train_single

    names = [n for n, _ in make_test_model("mlp").named_parameters()][::-1]
    plan = Plan("hier", tuple(Bucket((n,), algorithm="hierarchical") for n in names))
    case = {"id": "h", "model": "mlp", "optimizer": "sgd", "plan": plan.to_dict(),
            "steps": 3, "batch": 4, "find_unused": False}
    with EmulatedCluster(4, "1gbit", prefix=prefix, ranks_per_node=2) as c:
        res = launch("gradsched.runtime.tasks:exactness_cases",
                     {"cases": [case], "ddp": [], "timeout_s": 60},
                     c.launch_spec(op_timeout_s=60, deadline_s=180))
    ref = train_single("mlp", "sgd", 4, 3, 4)
    for name, values in res[0]["cases"]["h"]["params"].items():
        torch.testing.assert_close(torch.tensor(values), ref[name].reshape(-1), atol=1e-6,
                                   rtol=1e-5)
