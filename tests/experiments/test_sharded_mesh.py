"""Which mesh: FSDP vs reshard-to-node vs HSDP (experiments/sharded/mesh), the table and
macros (report/hsdp), ``shard mesh`` and ``advise --sharded --mesh``."""

from __future__ import annotations

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel.base import AlphaBetaModel
from gradsched.costmodel.mesh import TopologyPricer
from gradsched.costmodel.topology import Topology
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.mesh import (
    MeshCase,
    candidates,
    compare_meshes,
    recommended,
    state_bytes,
)
from gradsched.report.hsdp import mesh_macros, mesh_table
from tests.replay.test_sharded import block_trace

FAST = AlphaBetaModel(1e-5, 1e-10)  # SYNTHETIC levels
SLOW = AlphaBetaModel(1e-4, 1e-7)
BIG = [[4_000_000]] * 4  # 4 blocks of 4 MB


def test_candidates_are_fsdp_reshard_to_node_and_hsdp_of_whole_nodes() -> None:
    assert candidates(32, 8) == [("fsdp", 32, True), ("fsdp-reshard-node", 32, 8),
                                 ("hsdp-8", 8, True), ("hsdp-16", 16, True),
                                 ("hsdp-16-reshard-node", 16, 8)]
    assert candidates(8, 8) == [("fsdp", 8, True)]


def test_hsdp_pays_on_a_slow_network_and_not_on_a_fast_one() -> None:
    """The physical cause: HSDP keeps the all-gathers and reduce-scatters inside a node and
    sends only each shard's all-reduce across; FSDP sends every unit across nodes twice."""
    trace = block_trace(BIG, forward_s=0.01, backward_s=0.02)
    slow = compare_meshes(trace, TopologyPricer(Topology(4, 4, FAST, SLOW)), MeshCase())
    fast = compare_meshes(trace, TopologyPricer(Topology(4, 4, FAST, FAST)), MeshCase())
    by = {r.name: r for r in slow}
    assert by["hsdp-4"].replay.iteration_s < by["fsdp"].replay.iteration_s
    assert by["fsdp-reshard-node"].replay.iteration_s < by["fsdp"].replay.iteration_s
    assert recommended(slow, None).name != "fsdp"
    gain = {r.name: slow[0].replay.iteration_s / r.replay.iteration_s for r in slow}
    gain_fast = {r.name: fast[0].replay.iteration_s / r.replay.iteration_s for r in fast}
    assert gain["hsdp-4"] > gain_fast["hsdp-4"]
    # memory: the state is sharded over the shard group only
    assert by["hsdp-4"].state_bytes == pytest.approx(state_bytes(trace, 4))
    assert by["hsdp-4"].state_bytes == pytest.approx(4 * by["fsdp"].state_bytes)


def test_recommendation_needs_the_margin_and_the_memory() -> None:
    trace = block_trace(BIG, forward_s=0.01, backward_s=0.02)
    results = compare_meshes(trace, TopologyPricer(Topology(4, 4, FAST, SLOW)), MeshCase())
    best = recommended(results, None)
    gain = 100 * (results[0].replay.iteration_s / best.replay.iteration_s - 1)
    assert recommended(results, None, margin_pct=gain + 1).name == "fsdp"
    hsdp = next(r for r in results if r.name == "hsdp-4")
    tight = results[0].memory_bytes * 1.01  # FSDP fits, HSDP-4 (4x the state) does not
    assert hsdp.memory_bytes > tight
    assert all(r.memory_bytes <= tight for r in [recommended(results, tight)])
    with pytest.raises(ConfigError, match="no mesh fits"):
        recommended(results, 1.0)


def test_table_and_macros_from_rows() -> None:
    trace = block_trace(BIG, forward_s=0.01, backward_s=0.02)
    rows = []
    for world in (16, 32):
        results = compare_meshes(trace, TopologyPricer(Topology(world // 4, 4, FAST, SLOW)),
                                 MeshCase())
        best = recommended(results, None).name
        rows += [{"model": "llama-3.1-8b", "network": "x", "nics_per_node": 1,
                  "world_size": world, **r.row(None), "fastest": r.name == best}
                 for r in results]
    frame = pd.DataFrame(rows)
    table = mesh_table(frame)
    assert list(table["GPUs"]) == ["16", "32"]
    assert table["fastest that fits"].iloc[0] == frame[frame["fastest"]]["candidate"].iloc[0]
    macros = mesh_macros(frame)
    assert "HsdpLlamaEightOneNicSixteenGainPct" in macros
    assert "HsdpLlamaEightOneNicThirtyTwoSmallestShard" in macros
    assert macros["HsdpLlamaEightOneNicSixteenSmallestShard"] == "4"


def test_shard_mesh_and_advise_mesh_commands(tmp_path, capsys) -> None:
    topo = tmp_path / "topo.yaml"
    topo.write_text("nodes: 2\nranks_per_node: 4\n"
                    "intra: {kind: analytic, alpha_s: 1.0e-5, beta_s_per_byte: 1.0e-10, "
                    "algorithm: ring}\n"
                    "inter: {kind: analytic, alpha_s: 1.0e-4, beta_s_per_byte: 1.0e-7, "
                    "algorithm: ring}\n")
    trace = block_trace(BIG, forward_s=0.01, backward_s=0.02)
    csv = tmp_path / "t.csv"
    trace.save(csv)
    out = tmp_path / "m.csv"
    assert main(["shard", "mesh", "--compute", str(csv), "--topology", str(topo),
                 "-o", str(out), "--macros", str(tmp_path / "m.tex")]) == 0
    frame = pd.read_csv(out)
    assert set(frame["candidate"]) == {"fsdp", "fsdp-reshard-node", "hsdp-4"}
    assert frame["fastest"].sum() == 1
    capsys.readouterr()
    assert main(["advise", "--compute", str(csv), "--topology", str(topo), "--sharded",
                 "--mesh", "--margin-pct", "0", "--semantics", "streams",
                 "--overlap-slowdown", "off"]) == 0
    text = capsys.readouterr().out
    best = frame[frame["fastest"]].iloc[0]  # no margin: the fastest, as shard mesh says
    assert f"RECOMMENDATION: {best['candidate']} (" in text
    mesh = (f"({int(best['replicate'])}, {int(best['shard'])}), mesh_dim_names=(\"replicate\""
            if best["replicate"] > 1 else f"({int(best['shard'])},), mesh_dim_names=(\"shard\"")
    assert f'mesh = init_device_mesh("cuda", {mesh}' in text
    assert f"reshard_after_forward={best['reshard_after_forward'].capitalize()}, mesh=mesh)" \
        in text
    assert "fully_shard(model, mesh=mesh)" in text
    assert main(["advise", "--compute", str(csv), "--topology", str(topo), "--mesh"]) != 0
    assert "--mesh needs --sharded" in capsys.readouterr().err


def test_macro_names_cover_the_prose() -> None:
    """Every \\gsHsdp macro paper/sections/hsdp.tex uses is one the table rule writes."""
    import re
    from pathlib import Path

    from gradsched.report.hsdp import macro_names

    text = (Path(__file__).resolve().parents[2] / "paper/sections/hsdp.tex").read_text()
    used = set(re.findall(r"\\gs(Hsdp[A-Za-z]+)", text))
    assert used and used <= macro_names()
