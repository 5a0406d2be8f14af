"""``gradsched advise --topology FILE [--topology-collective flat|hierarchical]``:
advice on a two-level (intra-node, inter-node) topology.

Committed inputs: the ResNet-18 CPU compute trace and the committed 2-rank gloo loopback
sweep as the intra-node level. The inter-node levels written inline below
(``alpha-beta:...``) are synthetic, labelled as such: they only have to differ from the
intra level so that flat and hierarchical disagree.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from gradsched.cli import main
from gradsched.costmodel.topology import load_topology
from gradsched.experiments.margin import DEFAULT_MARGIN_PCT
from gradsched.planners import make_plan
from gradsched.replay.engine import ReplayOptions, replay
from gradsched.ties import same_time
from gradsched.traces.bundle import ComputeTrace

REPO = Path(__file__).resolve().parents[2]
R18 = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"
LOOP2 = REPO / "traces/comm/cpu/gloo-loopback-p2.csv"
SYNTHETIC_INTER = "alpha-beta:alpha=2e-4,beta=4e-8"  # synthetic slow network (labelled)


def _topology(tmp_path: Path, nodes: int, ranks: int, name: str = "topo.yaml",
              **levels: object) -> Path:
    data = {"nodes": nodes, "ranks_per_node": ranks, "intra": str(LOOP2),
            "inter": SYNTHETIC_INTER, **levels}
    path = tmp_path / name
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path


def _advise(tmp_path: Path, *args: str, compute: Path = R18) -> dict:
    out = tmp_path / "advice.json"
    assert main(["advise", "--compute", str(compute), *args, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _times(advice: dict) -> list[float]:
    return [p["iteration_s"] for p in advice["ddp"]["sweep"]] + [
        advice["plan"]["iteration_s"]]


def test_one_node_topology_is_its_intra_level(tmp_path: Path) -> None:
    """One node of 2 ranks is the intra sweep itself: the same advice as --comm."""
    topo = _topology(tmp_path, 1, 2)
    by_topology = _advise(tmp_path, "--topology", str(topo))
    by_comm = _advise(tmp_path, "--comm", str(LOOP2))
    assert by_topology["world_size"] == 2
    assert _times(by_topology) == pytest.approx(_times(by_comm), rel=1e-12)
    assert by_topology["topology_collective"] == "hierarchical"
    assert by_comm["topology_collective"] is None


@pytest.mark.parametrize("collective", ["flat", "hierarchical"])
def test_two_level_advice_replays_the_topology_model(tmp_path: Path, capsys,
                                                     collective: str) -> None:
    """2 nodes x 2 ranks: every DDP point is the replay on the topology's collective model
    (recomputed here); the printed plan command names the topology and rebuilds the plan."""
    topo = _topology(tmp_path, 2, 2)
    written = tmp_path / "plan.json"
    advice = _advise(tmp_path, "--topology", str(topo), "--topology-collective", collective,
                     "--margin-pct", "0", "--plan-out", str(written))
    text = capsys.readouterr().out
    assert advice["world_size"] == 4 and advice["topology_collective"] == collective
    assert f"topology {topo} ({collective} collectives)" in text
    trace = ComputeTrace.load(R18)
    model = load_topology(topo).collective_model(collective)
    options = ReplayOptions(iterations=5, issue="executor")
    for point in advice["ddp"]["sweep"]:
        knobs = {} if point["bucket_cap_mb"] is None else {"bucket_cap_mb":
                                                            point["bucket_cap_mb"]}
        plan = make_plan("ddp", trace, model, 4, knobs)
        assert point["iteration_s"] == pytest.approx(
            replay(trace, plan, model, 4, options).iteration_s, rel=1e-12)
    # margin 0: the plan when it gains; on a tie with the per-bucket caps (hierarchical
    # here), the caps, which stock DDP runs
    if advice["recommendation"] == "ddp-bucket-cap-mb-list":
        assert same_time(advice["plan"]["iteration_s"], advice["ddp"]["list"]["iteration_s"])
        return
    assert advice["recommendation"] == "gradsched-plan"
    line = next(ln for ln in text.splitlines() if "make the plan:" in ln)
    argv = line.split("make the plan:")[1].split("(or take")[0].split()
    assert argv[argv.index("--topology") + 1] == str(topo)
    assert argv[argv.index("--topology-collective") + 1] == collective
    assert "--comm" not in argv
    rebuilt = tmp_path / "rebuilt.json"
    argv[argv.index("-o") + 1] = str(rebuilt)
    assert main(argv[1:]) == 0
    assert rebuilt.read_bytes() == written.read_bytes()


def test_flat_and_hierarchical_differ(tmp_path: Path) -> None:
    """Over a slow (synthetic) inter level the two collective models predict differently."""
    topo = _topology(tmp_path, 2, 2)
    flat = _advise(tmp_path, "--topology", str(topo), "--topology-collective", "flat")
    hier = _advise(tmp_path, "--topology", str(topo), "--topology-collective", "hierarchical")
    assert flat["ddp"]["current"]["iteration_s"] != pytest.approx(
        hier["ddp"]["current"]["iteration_s"], rel=1e-6)


def test_margin_is_the_levels_heldout_error(tmp_path: Path) -> None:
    """Both levels fitted (gradsched fit -o records the held-out MAPE): the margin is the
    largest over the levels and the collectives they run; an inline level has none."""
    fitted = tmp_path / "loop2.interp.json"
    assert main(["fit", str(LOOP2), "--model", "interp", "-o", str(fitted)]) == 0
    held = json.loads(fitted.read_text())["meta"]["heldout_mape_pct"]
    topo = _topology(tmp_path, 2, 2, intra=str(fitted), inter=str(fitted))
    advice = _advise(tmp_path, "--topology", str(topo), "--topology-collective", "flat")
    used = {"all_reduce"}
    if any(b["collective"] == "rs_ag" for b in advice["plan"]["plan"]["buckets"]):
        used |= {"reduce_scatter", "all_gather"}
    assert advice["margin_pct"] == pytest.approx(max(held[c] for c in used))
    assert "topology's levels" in advice["margin_source"]
    hier = _advise(tmp_path, "--topology", str(topo))  # intra runs RS + AG, inter AR
    assert hier["margin_pct"] >= max(held["reduce_scatter"], held["all_gather"],
                                     held["all_reduce"]) - 1e-12
    inline = _topology(tmp_path, 2, 2, name="inline.yaml", intra=str(fitted))
    advice = _advise(tmp_path, "--topology", str(inline))
    assert advice["margin_pct"] == DEFAULT_MARGIN_PCT
    assert "inter-node level" in advice["margin_source"]


# --------------------------------------------------------------------------- bad input
def _fails(capsys, argv: list[str], *needles: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err


def test_exactly_one_of_comm_and_topology(tmp_path: Path, capsys) -> None:
    topo = _topology(tmp_path, 2, 2)
    base = ["advise", "--compute", str(R18)]
    _fails(capsys, base, "exactly one of --comm and --topology")
    _fails(capsys, [*base, "--comm", str(LOOP2), "--topology", str(topo)],
           "exactly one of --comm and --topology")
    _fails(capsys, [*base, "--comm", str(LOOP2), "--topology-collective", "flat"],
           "--topology-collective needs --topology")
    _fails(capsys, [*base, "--topology", str(tmp_path / "none.yaml")], "none.yaml",
           "not found")


def test_topology_world_size_differs_from_the_traces(tmp_path: Path, capsys) -> None:
    """A trace captured in a 2-rank job cannot be advised on a 2 x 2 topology."""
    trace = tmp_path / "r18-p2.csv"
    shutil.copy(R18, trace)
    meta = json.loads(R18.with_suffix(".meta.json").read_text())
    meta["world_size"] = 2
    trace.with_suffix(".meta.json").write_text(json.dumps(meta))
    topo = _topology(tmp_path, 2, 2)
    _fails(capsys, ["advise", "--compute", str(trace), "--topology", str(topo)],
           "r18-p2.meta.json", "world_size", "captured in a 2-rank job",
           "2 nodes x 2 ranks = 4")
    # the same trace on a topology of its own world size is fine
    assert main(["advise", "--compute", str(trace), "--topology",
                 str(_topology(tmp_path, 2, 1, name="p2.yaml"))]) == 0
    _fails(capsys, ["advise", "--compute", str(R18), "--topology", str(topo),
                    "--world-size", "8"], "topo.yaml", "2 nodes x 2 ranks = 4",
           "not --world-size 8")


def test_missing_level(tmp_path: Path, capsys) -> None:
    topo = _topology(tmp_path, 2, 2, inter=None)
    _fails(capsys, ["advise", "--compute", str(R18), "--topology", str(topo)], "topo.yaml",
           "field 'inter': missing")
    topo = _topology(tmp_path, 2, 2, name="badlevel.yaml", intra=str(tmp_path / "no.csv"))
    _fails(capsys, ["advise", "--compute", str(R18), "--topology", str(topo)],
           "badlevel.yaml", "intra")
