"""The importer of PipeDream's public per-layer GPU profiles (graph.txt).

Tests on the shipped files (data/external) check the importers against numbers recomputed
here from the raw text; the small graphs written in tests are SYNTHETIC and say so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces import ComputeTrace
from gradsched.traces.importers import pipedream
from gradsched.traces.importers.manifest import load_manifest
from tests.conftest import REPO

PIPEDREAM = "pipedream"
MANIFEST = REPO / "traces" / "manifest.yaml"
_META_RE = re.compile(r"forward_compute_time=([0-9.]+), backward_compute_time=([0-9.]+)")


def _graph(external_dir: Path, task: str, model: str) -> Path:
    return external_dir / PIPEDREAM / task / model / "graph.txt"


def _raw_totals(path: Path) -> tuple[float, float]:
    """Forward/backward ms summed straight from the text, Input nodes left out."""
    fwd = bwd = 0.0
    for line in path.read_text().splitlines():
        if line.startswith("\t") or re.match(r"^node\d+ -- Input\d* -- ", line):
            continue
        match = _META_RE.search(line)
        assert match, line
        fwd += float(match.group(1))
        bwd += float(match.group(2))
    return fwd, bwd


# ---------------------------------------------------------------- PipeDream: shipped files
_IC = "image_classification"
ALL_PIPEDREAM = [  # (task, model, image side, batch size the activation sizes imply)
    (_IC, "alexnet", 224, 256), (_IC, "densenet121", 224, 64), (_IC, "inception_v3", 299, 128),
    (_IC, "nasnetalarge", 224, 16), (_IC, "nasnetamobile", 224, 128),
    (_IC, "resnet101", 224, 64), (_IC, "resnet18", 224, 256), (_IC, "resnet50", 224, 128),
    (_IC, "resnext101", 224, 64), (_IC, "resnext50", 224, 128),
    (_IC, "squeezenet1_0", 224, 256), (_IC, "vgg16", 224, 128),
    ("translation", "gnmt", 224, 32), ("translation", "gnmt_large", 224, 128),
]


@pytest.mark.parametrize(("task", "model", "side", "batch"), ALL_PIPEDREAM)
def test_pipedream_all_profiles(external_dir: Path, task: str, model: str, side: int,
                                batch: int) -> None:
    path = _graph(external_dir, task, model)
    result = pipedream.import_pipedream(path, pipedream.Options(image_size=side))
    trace = result.compute
    assert trace is not None
    assert trace.meta["batch_size"] == batch
    assert trace.meta["device"] == "not stated by the source"
    fwd_ms, bwd_ms = _raw_totals(path)
    assert trace.forward_total_s == pytest.approx(fwd_ms * 1e-3, rel=1e-9)
    assert trace.backward_total_s == pytest.approx(bwd_ms * 1e-3, rel=1e-9)
    params = sum(float(m) for m in re.findall(r"parameter_size=([0-9.]+)", path.read_text()))
    assert trace.total_bytes == int(params)
    assert (trace.frame["numel"] > 0).all()
    assert list(trace.frame["ready_order"]) == list(range(trace.n_tensors - 1, -1, -1))


def test_pipedream_resnet50_totals_and_batch(external_dir: Path) -> None:
    """ResNet-50 at 128: ~183 ms forward + ~261 ms backward (the shared README's reading)."""
    trace = pipedream.import_pipedream(
        _graph(external_dir, "image_classification", "resnet50")).compute
    assert trace is not None
    assert trace.meta["batch_size"] == 128
    assert trace.forward_total_s == pytest.approx(0.183, abs=0.001)
    assert trace.backward_total_s == pytest.approx(0.261, abs=0.001)
    # 53 conv + batch-norm layers x 2 + the final Linear: 107 modules with parameters.
    assert trace.n_tensors == 107
    assert trace.frame["name"].iloc[0] == "node2.Conv2d"
    assert trace.frame["name"].iloc[-1].endswith(".Linear")
    # ResNet-50 has 25,557,032 parameters.
    assert int(trace.frame["numel"].sum()) == 25_557_032


def test_pipedream_order_follows_the_dag(external_dir: Path) -> None:
    path = _graph(external_dir, "image_classification", "resnet50")
    modules, edges = pipedream._parse(path)
    succ = {n: {} for n in modules}
    for a, b, line in edges:
        succ[a][b] = line
    order = pipedream.topological_order(modules, succ, path)
    position = {m.node_id: i for i, m in enumerate(order)}
    assert all(position[a] < position[b] for a, b, _ in edges)
    # The file's line order is not an execution order (some edges point to earlier lines).
    assert any(modules[a].line > modules[b].line for a, b, _ in edges)


def test_pipedream_odd_ratios_are_warnings(external_dir: Path) -> None:
    result = pipedream.import_pipedream(
        _graph(external_dir, "image_classification", "alexnet"))
    text = " ".join(w.message for w in result.warnings)
    assert "total backward" in text and "= 0.90" in text
    assert "node2 Conv2d" in text
    assert result.compute is not None
    assert any("total backward" in w for w in result.compute.meta["warnings"])


def test_pipedream_gnmt_batch_from_lstm_state(external_dir: Path) -> None:
    trace = pipedream.import_pipedream(_graph(external_dir, "translation", "gnmt")).compute
    assert trace is not None
    assert trace.meta["batch_size"] == 32
    assert "LSTM hidden state" in trace.meta["batch_size_rule"]
    with pytest.raises(InputError, match="contradicts"):
        pipedream.import_pipedream(_graph(external_dir, "translation", "gnmt"),
                                   pipedream.Options(batch_size=64))


def test_pipedream_manifest_lists_all_profiles(external_dir: Path) -> None:
    entries = [e for e in load_manifest(MANIFEST) if e.importer == "pipedream"]
    shipped = {str(p.relative_to(external_dir)) for p in (external_dir / PIPEDREAM).rglob(
        "graph.txt")}
    assert {e.file for e in entries} == shipped
    assert len(shipped) == 14
    for entry in entries:
        committed = ComputeTrace.load(REPO / "traces" / entry.out)
        assert committed.meta["importer"] == "pipedream"


# ---------------------------------------------------------------- PipeDream: synthetic graphs
def _line(node: str, desc: str, fwd: float, bwd: float, act: str, params: float) -> str:
    return (f"{node} -- {desc} -- forward_compute_time={fwd:.3f}, backward_compute_time="
            f"{bwd:.3f}, activation_size={act}, parameter_size={params:.3f}")


SYNTHETIC = [  # SYNTHETIC graph: Input -> conv -> relu -> conv -> relu -> linear; batch 2
    _line("node1", "Input", 50.0, 0.0, f"{3 * 224 * 224 * 4 * 2:.3f}", 0),
    _line("node5", "Conv2d(3, 8, kernel_size=(3, 3))", 2.0, 3.0, "100.000", 896),
    _line("node2", "ReLU(inplace)", 0.5, 0.25, "100.000", 0),
    _line("node4", "Conv2d(8, 8, kernel_size=(3, 3))", 1.0, 2.0, "100.000", 2336),
    _line("node3", "ReLU(inplace)", 0.125, 0.5, "100.000", 0),
    _line("node6", "Linear(in_features=8, out_features=2, bias=True)", 1.5, 1.0, "16.000", 72),
    _line("node7", "Softmax()", 0.25, 0.75, "16.000", 0),
    "\tnode1 -- node5", "\tnode5 -- node2", "\tnode2 -- node4", "\tnode4 -- node3",
    "\tnode3 -- node6", "\tnode6 -- node7",
]


def _write(tmp_path: Path, lines: list[str], name: str = "graph.txt") -> Path:
    path = tmp_path / "synthetic" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def test_pipedream_synthetic_attribution(tmp_path: Path) -> None:
    trace = pipedream.import_pipedream(_write(tmp_path, SYNTHETIC)).compute
    assert trace is not None
    assert trace.names == ["node5.Conv2d", "node4.Conv2d", "node6.Linear"]
    assert trace.meta["batch_size"] == 2
    assert list(trace.frame["numel"]) == [224, 584, 18]
    # forward: each row + the parameterless modules before it; the trailing Softmax -> last.
    assert list(trace.frame["forward_s"]) == pytest.approx([2.0e-3, 1.5e-3, 1.875e-3])
    # backward (reverse order): Softmax + Linear; ReLU + conv; ReLU + conv.
    assert list(trace.frame["backward_s"]) == pytest.approx([3.25e-3, 2.5e-3, 1.75e-3])
    assert list(trace.frame["ready_order"]) == [2, 1, 0]


def test_pipedream_node_order_in_file_does_not_matter(tmp_path: Path) -> None:
    nodes, edges = SYNTHETIC[:7], SYNTHETIC[7:]
    first = pipedream.import_pipedream(_write(tmp_path, SYNTHETIC, "a.txt")).compute
    second = pipedream.import_pipedream(
        _write(tmp_path, nodes[::-1] + edges[::-1], "b.txt")).compute
    assert first is not None and second is not None
    assert first.frame.equals(second.frame)


BAD_PIPEDREAM = [
    ("truncated-node", [*SYNTHETIC[:3], SYNTHETIC[3][:60]], 4, "node"),
    ("truncated-meta", [*SYNTHETIC[:3], SYNTHETIC[3].split(", parameter_size")[0]], 4,
     "parameter_size"),
    ("truncated-edge", [*SYNTHETIC[:-1], "\tnode6 -- nod"], 13, "edge"),
    ("missing-field", [SYNTHETIC[0], SYNTHETIC[1].replace("backward_compute_time=3.000, ", ""),
                       *SYNTHETIC[2:]], 2, "backward_compute_time"),
    ("cycle", [*SYNTHETIC, "\tnode3 -- node2"], None, "edge"),
    ("not-a-number", [SYNTHETIC[0], SYNTHETIC[1].replace("=2.000", "=two"), *SYNTHETIC[2:]],
     2, "forward_compute_time"),
    ("isolated-node", SYNTHETIC[:-1], 7, "edge"),
]


@pytest.mark.parametrize(("label", "lines", "line", "field"), BAD_PIPEDREAM,
                         ids=[b[0] for b in BAD_PIPEDREAM])
def test_pipedream_bad_input(tmp_path: Path, label: str, lines: list[str], line: int | None,
                             field: str) -> None:
    path = _write(tmp_path, lines)
    with pytest.raises(InputError) as err:
        pipedream.import_pipedream(path)
    assert err.value.path == str(path)
    assert err.value.field == field
    if line is not None:
        assert err.value.line == line
    else:
        assert err.value.line is not None and "cycle" in err.value.reason


def test_pipedream_cycle_names_its_nodes(tmp_path: Path) -> None:
    path = _write(tmp_path, [*SYNTHETIC, "\tnode3 -- node2"])
    with pytest.raises(InputError, match=r"node2 -> node4 -> node3 -> node2"):
        pipedream.import_pipedream(path)


def test_pipedream_no_backward_and_no_parameters(tmp_path: Path) -> None:
    no_bwd = [re.sub(r"backward_compute_time=[0-9.]+", "backward_compute_time=0.000", s)
              for s in SYNTHETIC]
    with pytest.raises(InputError, match="no backward"):
        pipedream.import_pipedream(_write(tmp_path, no_bwd, "nobwd.txt"))
    no_params = [re.sub(r"parameter_size=[0-9.]+", "parameter_size=0.000", s)
                 for s in SYNTHETIC]
    with pytest.raises(InputError, match="no module has parameters"):
        pipedream.import_pipedream(_write(tmp_path, no_params, "noparams.txt"))


def test_pipedream_cli_error_writes_nothing(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, [*SYNTHETIC, "\tnode3 -- node2"])
    out = tmp_path / "out" / "t.csv"
    assert main(["import", "pipedream", str(path), "-o", str(out)]) == 2
    assert "cycle" in capsys.readouterr().err
    assert not out.exists() and not out.with_name("t.meta.json").exists()
    good = _write(tmp_path, SYNTHETIC, "good.txt")
    assert main(["import", "pipedream", str(good), "-o", str(out)]) == 0
    assert ComputeTrace.load(out).n_tensors == 3
