"""``gradsched study topology-replay`` / ``report topology-replay-table``: replay
on a two-level (intra-node, inter-node) topology, flat and hierarchical.

The replay tests use the committed ResNet-18 CPU compute trace with SYNTHETIC topology
levels (inline alpha-beta models, labelled below): they check the wiring (each row is the
replay on the named collective model, the pairing, the table) rather than any cluster.
The last tests read the committed ABCI topology files (config/topologies/) and re-identify
their inter level from the shipped 2-node sweep.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gradsched.cli import main
from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.topology import load_topology
from gradsched.errors import InputError
from gradsched.experiments.grid import compare
from gradsched.experiments.topology import COLUMNS, TopologyCase, topology_replay
from gradsched.replay.engine import ReplayOptions
from gradsched.report.topology import paired, topology_replay_table
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.forward import with_forward

REPO = Path(__file__).resolve().parents[2]
R18 = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"
LOOP4 = REPO / "traces/comm/cpu/gloo-loopback-p4.csv"
# SYNTHETIC levels (labelled): a fast node, a slow network.
SYNTHETIC_INTRA = "alpha-beta:alpha=1e-5,beta=1e-10"
SYNTHETIC_INTER = "alpha-beta:alpha=1e-4,beta=2e-9"


def _topo(tmp_path: Path, nodes: int, ranks: int, name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"nodes": nodes, "ranks_per_node": ranks,
                                    "intra": SYNTHETIC_INTRA, "inter": SYNTHETIC_INTER}))
    return path


def _cases(topo: Path, measured: Path | None = None) -> list[TopologyCase]:
    return [TopologyCase(f"t-{c}", topo, c, measured) for c in ("flat", "hierarchical")]


def test_rows_are_the_replay_on_each_collective_model(tmp_path: Path) -> None:
    topo = _topo(tmp_path, 2, 2)
    frame = topology_replay({"r18": R18}, _cases(topo), ["wfbp", "ddp"], iterations=3)
    assert list(frame.columns) == list(COLUMNS)
    assert len(frame) == 4 and set(frame["world_size"]) == {4}
    trace = with_forward(ComputeTrace.load(R18), None)
    for collective in ("flat", "hierarchical"):
        model = load_topology(topo).collective_model(collective)
        expected = compare(trace, model, 4, ["wfbp", "ddp"],
                           options=ReplayOptions(iterations=3)).set_index("algorithm")
        got = frame[frame["collective"] == collective].set_index("algorithm")
        for alg in ("wfbp", "ddp"):
            assert got.loc[alg, "iteration_s"] == pytest.approx(
                expected.loc[alg, "iteration_s"], rel=1e-12)
    # no measured sweep: the reference columns are empty
    assert frame["sweep_iteration_s"].isna().all()
    # over a slow synthetic network the two models differ
    wide = paired(frame)
    assert (wide["flat_over_hierarchical"] != 1.0).all()


def test_one_node_flat_equals_hierarchical(tmp_path: Path) -> None:
    """One node: both collective models are the intra level itself (ratio exactly 1)."""
    topo = _topo(tmp_path, 1, 4)
    frame = topology_replay({"r18": R18}, _cases(topo, LOOP4), ["wfbp"], iterations=3)
    wide = paired(frame)
    assert wide["flat_over_hierarchical"].tolist() == [1.0]
    # the measured sweep (4 gloo ranks) is replayed as the reference
    trace = with_forward(ComputeTrace.load(R18), None)
    ref = compare(trace, load_comm_spec(str(LOOP4)), 4, ["wfbp"],
                  options=ReplayOptions(iterations=3))["iteration_s"].iloc[0]
    assert wide["sweep_s"].iloc[0] == pytest.approx(ref, rel=1e-12)
    row = frame.iloc[0]
    assert row["vs_sweep_pct"] == pytest.approx(100 * (row["iteration_s"] / ref - 1))


def test_measured_sweep_of_another_world_size(tmp_path: Path) -> None:
    topo = _topo(tmp_path, 2, 4)  # 8 ranks; the loopback sweep holds 4
    with pytest.raises(InputError) as exc:
        topology_replay({"r18": R18}, _cases(topo, LOOP4), ["wfbp"], iterations=3)
    assert "gloo-loopback-p4.csv" in str(exc.value) and "8 ranks" in str(exc.value)


def _synthetic_frame() -> pd.DataFrame:
    """SYNTHETIC result rows (labelled): one model, one shape, two algorithms."""
    rows = []
    for collective, scale in (("flat", 1.2), ("hierarchical", 1.0)):
        for alg, base in (("wfbp", 0.1), ("ddp", 0.08)):
            rows.append({"compute": "m", "topology": f"x-{collective}",
                         "collective": collective, "nodes": 2, "ranks_per_node": 8,
                         "world_size": 16, "algorithm": alg, "iteration_s": base * scale,
                         "exposed_comm_s": 0.0, "measured_sweep": "s",
                         "sweep_iteration_s": base * 1.1, "vs_sweep_pct": 0.0})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_table_pairs_flat_and_hierarchical() -> None:
    table, align = topology_replay_table(_synthetic_frame())
    assert len(align) == len(table.columns) == 7
    assert table["nodes x GPUs"].tolist() == ["2 x 8", "2 x 8"]
    row = table[table["algorithm"].str.lower().str.contains("wfbp")].iloc[0]
    assert row["flat [ms]"] == "120.0" and row["hierarchical [ms]"] == "100.0"
    assert row["flat / hier."] == "1.200" and row["measured sweep [ms]"] == "110.0"
    empty, _ = topology_replay_table(pd.DataFrame())
    assert empty.empty


def test_two_cases_of_one_shape_and_model_are_refused() -> None:
    frame = _synthetic_frame()
    dup = pd.concat([frame, frame.assign(topology="other")], ignore_index=True)
    with pytest.raises(InputError, match="one topology case per cluster shape"):
        paired(dup)


def test_cli_end_to_end_and_bad_input(tmp_path: Path, capsys) -> None:
    topo = _topo(tmp_path, 1, 4)
    out = tmp_path / "topo.csv"
    argv = ["study", "topology-replay", "--compute", "r18", str(R18),
            "--topology", "a", str(topo), "flat", "--topology", "b", str(topo), "hierarchical",
            "--measured", "a", str(LOOP4), "--algorithms", "wfbp", "--replay-iters", "3",
            "-o", str(out)]
    assert main(argv) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 2 and math.isnan(frame.loc[1, "sweep_iteration_s"])
    tex, md = tmp_path / "t.tex", tmp_path / "t.md"
    assert main(["report", "topology-replay-table", "--input", str(out), "--tex", str(tex),
                 "--md", str(md)]) == 0
    assert "flat / hier." in md.read_text() and r"\toprule" in tex.read_text()
    capsys.readouterr()
    bad = [*argv[:-2], "--measured", "zzz", str(LOOP4), "-o", str(out)]
    assert main(bad) == 2
    assert "--measured zzz: no --topology of that name" in capsys.readouterr().err
    broken = tmp_path / "broken.csv"
    frame.drop(columns=["collective"]).to_csv(broken, index=False)
    assert main(["report", "topology-replay-table", "--input", str(broken), "--tex",
                 str(tex), "--md", str(md)]) == 2
    err = capsys.readouterr().err
    assert "collective" in err and "broken.csv" in err
    assert main([*argv[:5], "--topology", "c", str(topo), "ring", "-o", str(out)]) == 2
    assert "collective must be one of flat, hierarchical" in capsys.readouterr().err


# ------------------------------------------------------- the committed ABCI topology files
@pytest.mark.parametrize("collective, algorithm", [("hierarchical", "best"),
                                                   ("flat", "ring")])
def test_committed_inter_levels_are_the_identified_ones(collective: str,
                                                        algorithm: str) -> None:
    """config/topologies/abci-a100-*: the inter level written there is the one
    identify_inter_level finds from the shipped 2-node sweep (4 significant digits)."""
    from gradsched.costmodel.topology_fit import identify_inter_level, load_all_reduce_sweep

    ext = REPO / "traces/comm/external"
    intra = load_comm_spec(str(ext / "nccl-abci-intra-anode-8.csv"))
    m, t, world, nodes = load_all_reduce_sweep(ext / "nccl-abci-inter-anode-2.csv")
    inter = identify_inter_level(intra, m, t, nodes, world // nodes, collective, algorithm)
    for n in (2, 4):
        topo = load_topology(REPO / f"config/topologies/abci-a100-{n}x8-{collective}.yaml")
        assert (topo.nodes, topo.ranks_per_node) == (n, 8)
        assert topo.inter.alpha == pytest.approx(inter.alpha, rel=5e-4)
        assert topo.inter.beta == pytest.approx(inter.beta, rel=5e-4)


def test_workflow_rule_replays_the_configured_topologies() -> None:
    """The `topology_replay` rule passes every configured topology (with its collective
    model and measured sweep) and compute trace to the command (dry run)."""
    import subprocess
    import sys

    snakemake = Path(sys.executable).parent / "snakemake"
    if not snakemake.exists():
        pytest.skip("snakemake is not in the venv")
    proc = subprocess.run([str(snakemake), "-n", "-p", "--forceall", "--nolock", "--cores",
                           "1", "paper/tables/topology-replay.tex"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    spec = config["topology_replay"]
    for name in spec["topologies"]:
        entry = config["topologies"][name]
        assert f"--topology {name} {entry['file']} {entry['collective']}" in proc.stdout
        assert f"--measured {name} {entry['measured']}" in proc.stdout
    for name in spec["compute"]:
        assert f"--compute {name} {config['compute'][name]}" in proc.stdout
    assert "--algorithms " + ",".join(spec["algorithms"]) in proc.stdout
    assert "paper/tables/topology-replay.tex" in proc.stdout
