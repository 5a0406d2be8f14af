"""Two-level topology: hand-computed flat and hierarchical costs, properties, bad descriptions.

All cost models here are synthetic alpha-beta levels (labelled numbers, not measurements).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gradsched.costmodel import AlphaBetaModel, Topology, model_from_dict
from gradsched.costmodel.topology import load_topology, topology_from_dict
from gradsched.errors import ConfigError, InputError

# synthetic levels: NVLink-like inside the node, a slower network between nodes
A_INTRA, B_INTRA = 2e-6, 1e-10
A_INTER, B_INTER = 1e-5, 1e-9
M = 1e6


def _topology(nodes: int = 2, ranks: int = 4) -> Topology:
    return Topology(nodes, ranks, AlphaBetaModel(A_INTRA, B_INTRA),
                    AlphaBetaModel(A_INTER, B_INTER))


def test_hierarchical_all_reduce_by_hand() -> None:
    # RS_intra(M) + AR_inter(M/4) + AG_intra(M), RS/AG = half an all-reduce's alpha and beta
    expected = (A_INTRA / 2 + B_INTRA / 2 * M) + (A_INTER + B_INTER * M / 4) \
        + (A_INTRA / 2 + B_INTRA / 2 * M)
    assert expected == pytest.approx(3.62e-4)
    model = _topology().collective_model("hierarchical")
    assert model.time("all_reduce", M, 8) == pytest.approx(expected, rel=1e-12)


def test_hierarchical_reduce_scatter_and_all_gather_by_hand() -> None:
    model = _topology().collective_model("hierarchical")
    expected = (A_INTRA / 2 + B_INTRA / 2 * M) + (A_INTER / 2 + B_INTER / 2 * M / 4)
    assert model.time("reduce_scatter", M, 8) == pytest.approx(expected, rel=1e-12)
    assert model.time("all_gather", M, 8) == pytest.approx(expected, rel=1e-12)


def test_flat_ring_by_hand() -> None:
    # P = 8 ranks, 14 steps of M/8 bytes paced by the inter-node link: per-step latency
    # A/(2(N-1)) = A, link rate: B = 2(N-1)/N * beta_link -> beta_link = B
    per_step = A_INTER / (2 * (2 - 1))
    beta_link = B_INTER * 2 / (2 * (2 - 1))
    expected = 14 * (per_step + M / 8 * beta_link)
    assert expected == pytest.approx(7 * A_INTER + 1.75 * B_INTER * M)
    model = _topology().collective_model("flat")
    assert model.time("all_reduce", M, 8) == pytest.approx(expected, rel=1e-12)
    assert model.time("reduce_scatter", M, 8) == pytest.approx(expected / 2, rel=1e-12)


def test_flat_ring_paced_by_intra_when_it_is_slower() -> None:
    # swap the levels: the node's links are now the slow ones (R = 4: 7/3 a, 7/6 b M)
    topo = Topology(2, 4, AlphaBetaModel(A_INTER, B_INTER), AlphaBetaModel(A_INTRA, B_INTRA))
    expected = 7 / 3 * A_INTER + 7 / 6 * B_INTER * M
    assert topo.collective_model("flat").time("all_reduce", M, 8) == pytest.approx(expected)


@pytest.mark.parametrize("kind", ["flat", "hierarchical"])
def test_one_node_is_the_intra_model(kind: str) -> None:
    topo = _topology(nodes=1, ranks=8)
    sizes = np.geomspace(1, 2**28, 29)
    for collective in ("all_reduce", "reduce_scatter", "all_gather"):
        got = topo.collective_model(kind).times(collective, sizes, 8)
        np.testing.assert_allclose(got, topo.intra.times(collective, sizes, 8), rtol=1e-12)


def test_one_rank_per_node_is_the_inter_model() -> None:
    topo = _topology(nodes=4, ranks=1)
    for kind in ("flat", "hierarchical"):
        assert topo.collective_model(kind).time("all_reduce", M, 4) == pytest.approx(
            topo.inter.time("all_reduce", M, 4))


def test_world_sizes_and_wrong_world_size() -> None:
    model = _topology(2, 4).collective_model("hierarchical")
    assert model.world_sizes() == (8,)
    with pytest.raises(ConfigError, match="2 nodes x 4 ranks = 8"):
        model.time("all_reduce", M, 16)


def test_round_trip_through_model_json() -> None:
    model = _topology().collective_model("flat")
    again = model_from_dict(json.loads(json.dumps(model.to_dict())))
    assert again.time("all_reduce", M, 8) == model.time("all_reduce", M, 8)


levels = st.tuples(st.floats(0.0, 1e-3), st.floats(0.0, 1e-8))
faster = st.floats(0.0, 1.0)


# the case a least-squares wire floor over the flat ring's kinked curve got 0.26% wrong
@example(intra=(9.847e-4, 0.0), inter=(4.152e-4, 6.825e-10), scale=0.5, which=2, kind="flat",
         collective="all_reduce", shape=(16, 8), nbytes=4835835.65)
@given(intra=levels, inter=levels, scale=faster, which=st.sampled_from(range(4)),
       kind=st.sampled_from(["flat", "hierarchical"]),
       collective=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
       shape=st.sampled_from([(2, 4), (4, 2), (3, 8), (16, 8)]),
       nbytes=st.floats(1.0, 2.0**30))
def test_a_faster_link_is_never_slower(intra: tuple[float, float], inter: tuple[float, float],
                                       scale: float, which: int, kind: str, collective: str,
                                       shape: tuple[int, int], nbytes: float) -> None:
    params = [*intra, *inter]
    better = list(params)
    better[which] *= scale  # a smaller alpha or beta at one level
    nodes, ranks = shape

    def cost(p: list[float]) -> float:
        topo = Topology(nodes, ranks, AlphaBetaModel(p[0], p[1]), AlphaBetaModel(p[2], p[3]))
        return topo.collective_model(kind).time(collective, nbytes, nodes * ranks)

    assert cost(better) <= cost(params) * (1 + 1e-9) + 1e-15


@given(alpha=st.floats(0.0, 1e-3), beta=st.floats(0.0, 1e-8), ranks=st.integers(1, 16),
       nbytes=st.floats(1.0, 2.0**30))
def test_hierarchical_of_one_node_equals_intra(alpha: float, beta: float, ranks: int,
                                               nbytes: float) -> None:
    topo = Topology(1, ranks, AlphaBetaModel(alpha, beta), AlphaBetaModel(1.0, 1e-3))
    got = topo.collective_model("hierarchical").time("all_reduce", nbytes, ranks)
    assert got == pytest.approx(topo.intra.time("all_reduce", nbytes, ranks), rel=1e-12)


# ------------------------------------------------------------------ descriptions

def _write(tmp_path: Path, data: object, name: str = "topo.json") -> Path:
    path = tmp_path / name
    text = json.dumps(data) if name.endswith(".json") else str(data)
    path.write_text(text)
    return path


GOOD = {"nodes": 2, "ranks_per_node": 4, "intra": "alpha-beta:alpha=2e-6,beta=1e-10",
        "inter": {"kind": "alpha-beta", "alpha_s": 1e-5, "beta_s_per_byte": 1e-9}}


def test_load_json_and_yaml(tmp_path: Path) -> None:
    topo = load_topology(_write(tmp_path, GOOD))
    assert (topo.nodes, topo.ranks_per_node, topo.world_size) == (2, 4, 8)
    yaml_text = ("nodes: 2\nworld_size: 8\nintra: alpha-beta:alpha=2e-6,beta=1e-10\n"
                 "inter: alpha-beta:alpha=1e-5,beta=1e-9\n")
    again = load_topology(_write(tmp_path, yaml_text, "topo.yaml"))
    assert again.collective_model("hierarchical").time("all_reduce", M, 8) == pytest.approx(
        topo.collective_model("hierarchical").time("all_reduce", M, 8))


def test_level_path_is_relative_to_the_file(tmp_path: Path) -> None:
    AlphaBetaModel(A_INTRA, B_INTRA).save(tmp_path / "intra.json")
    topo = load_topology(_write(tmp_path, {**GOOD, "intra": "intra.json"}))
    assert topo.intra.time("all_reduce", M, 4) == pytest.approx(A_INTRA + B_INTRA * M)


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"ranks_per_node": None, "world_size": 9}, "world_size", "not divisible by 2 nodes"),
    ({"inter": None}, "inter", "missing"),
    ({"intra": None}, "intra", "missing"),
    ({"ranks_per_node": 0}, "ranks_per_node", "less than the minimum of 1"),
    ({"nodes": -1}, "nodes", "less than the minimum of 1"),
    ({"nodes": 2.5}, "nodes", "not of type 'integer'"),
    ({"ranks_per_node": None}, None, "needs 'ranks_per_node' or 'world_size'"),
    ({"world_size": 10}, "world_size", "!= nodes x ranks_per_node"),
    ({"intra": 3}, "intra", "expected a --comm spec"),
    ({"intra": " "}, "intra", "must be a --comm spec"),
    ({"inter": "nowhere.csv"}, "inter", "the inter-node level: .*nowhere.csv.*not found"),
    ({"inter": "alpha-beta:alpha=1"}, "inter", "missing beta"),
    ({"extra": 1}, "extra", "unknown field; known: inter, intra, nodes"),
])
def test_bad_descriptions_are_clear_errors(tmp_path: Path, change: dict, field: str | None,
                                           message: str) -> None:
    data = {**GOOD, **change}
    data = {k: v for k, v in data.items() if v is not None}
    path = _write(tmp_path, data)
    with pytest.raises(InputError, match=message) as info:
        load_topology(path)
    assert str(tmp_path) in str(info.value)
    if field is not None:
        assert info.value.field == field


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="topology file not found"):
        load_topology(tmp_path / "none.yaml")
    with pytest.raises(InputError, match="not valid YAML"):
        load_topology(_write(tmp_path, "nodes: [2\n", "bad.yaml"))
    with pytest.raises(InputError, match="expected a mapping"):
        load_topology(_write(tmp_path, "- 1\n", "list.yaml"))


def test_direct_construction_is_checked() -> None:
    intra = AlphaBetaModel(A_INTRA, B_INTRA)
    with pytest.raises(ConfigError, match="ranks_per_node must be in"):
        Topology(2, 0, intra, intra)
    with pytest.raises(ConfigError, match="not divisible by 3 nodes"):
        Topology.from_world(8, 3, intra, intra)
    with pytest.raises(ConfigError, match="not a comm model"):
        Topology(2, 2, intra, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown topology collective"):
        Topology(2, 2, intra, intra).collective_model("tree")
    with pytest.raises(InputError, match="unknown field"):
        topology_from_dict({**GOOD, "nodez": 2})


def test_cli_replay_and_plan_with_a_topology(tmp_path: Path) -> None:
    from gradsched.cli import main

    compute = Path(__file__).parents[2] / "traces/compute/bcaffe/googlenet-tmp8comm.csv"
    topo = _write(tmp_path, GOOD)
    results = {}
    for kind in ("flat", "hierarchical"):
        out = tmp_path / f"{kind}.csv"
        assert main(["replay", "--compute", str(compute), "--topology", str(topo),
                     "--topology-collective", kind, "--algorithms", "wfbp,ddp",
                     "-o", str(out)]) == 0
        results[kind] = out.read_text()
    assert results["flat"] != results["hierarchical"]
    assert main(["plan", "--compute", str(compute), "--topology", str(topo),
                 "--algorithm", "mgwfbp", "-o", str(tmp_path / "p.json")]) == 0
    assert main(["plan", "--compute", str(compute), "--algorithm", "mgwfbp",
                 "-o", str(tmp_path / "q.json")]) == 2  # neither --comm nor --topology
    assert not (tmp_path / "q.json").exists()


@given(intra=levels, inter=levels, shape=st.sampled_from([(2, 4), (4, 2), (3, 8)]),
       nbytes=st.floats(1.0, 2.0**30))
def test_hierarchical_reduce_scatter_plus_all_gather_is_the_all_reduce(
        intra: tuple[float, float], inter: tuple[float, float], shape: tuple[int, int],
        nbytes: float) -> None:
    # DeAR's rs_ag buckets: with alpha-beta levels the two halves add up to one all-reduce
    nodes, ranks = shape
    model = Topology(nodes, ranks, AlphaBetaModel(*intra),
                     AlphaBetaModel(*inter)).collective_model("hierarchical")
    world = nodes * ranks
    halves = model.time("reduce_scatter", nbytes, world) + model.time("all_gather", nbytes, world)
    assert halves == pytest.approx(model.time("all_reduce", nbytes, world), rel=1e-9, abs=1e-15)
