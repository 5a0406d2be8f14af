"""Inputs that were accepted silently on commit 181ccde, each now refused with one line
naming the file and the row or field, or the option typed (``docs/errors.md``).

Run in-process through :func:`gradsched.cli.main`. The traces are copies of committed ones
with one defect planted; the Kineto traces are the SYNTHETIC hand-written trace of
``tests/traces/importers/test_kineto_gpu.py`` with one defect each.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.robustness.refusal import refused
from tests.traces.importers.test_kineto_gpu import synthetic_trace

COMPUTE = "traces/compute/cpu/resnet18-b4-cpu-fp32"
COMM = REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv"
EXT = REPO / "traces/comm/external"


def _copy(d: Path, name: str) -> tuple[Path, Path]:
    for suffix in (".csv", ".meta.json"):
        shutil.copyfile(REPO / f"{COMPUTE}{suffix}", d / f"{name}{suffix}")
    return d / f"{name}.csv", d / f"{name}.meta.json"


def test_a_nul_byte_in_a_tensor_name_is_refused(tmp_path, capsys) -> None:
    csv, _ = _copy(tmp_path, "nul")
    lines = csv.read_text(encoding="utf-8").split("\n")
    lines[2] = lines[2].replace(".", ".\x00", 1)  # row 2's tensor name
    csv.write_text("\n".join(lines), encoding="utf-8")
    refused(["replay", "--compute", str(csv), "--comm", str(COMM), "-o",
             str(tmp_path / "r.csv")], capsys, "nul.csv", "row 2", "field 'name'", "NUL")
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_nan_in_a_sidecar_fails_validation(tmp_path, capsys, value: str) -> None:
    csv, meta = _copy(tmp_path, "nan")
    text = re.sub(r'"iteration_s": [^,\n}]+', f'"iteration_s": {value}',
                  meta.read_text(encoding="utf-8"))
    assert value in text
    meta.write_text(text, encoding="utf-8")
    refused(["traces", "validate", str(csv)], capsys, "nan.meta.json",
            "field 'iteration_s'", "NaN or infinity")


@pytest.mark.parametrize("knob", ["forward_prefetch=1000000", "backward_prefetch=9"])
def test_a_prefetch_deeper_than_the_units_is_refused(tmp_path, capsys, knob: str) -> None:
    out = tmp_path / "sp.json"
    refused(["shard", "plan", "--compute", str(REPO / f"{COMPUTE}.csv"), "--comm", str(COMM),
             "--world-size", "2", "--algorithm", "fsdp2", "--knob", knob, "-o", str(out)],
            capsys, f"--knob {knob}", "number of units (8)")
    assert not out.exists()


def test_a_prefetch_within_the_units_is_planned(tmp_path, capsys) -> None:
    from gradsched.cli import main

    out = tmp_path / "sp.json"
    assert main(["shard", "plan", "--compute", str(REPO / f"{COMPUTE}.csv"), "--comm",
                 str(COMM), "--world-size", "2", "--algorithm", "fsdp2", "--knob",
                 "forward_prefetch=8", "-o", str(out)]) == 0, capsys.readouterr().err
    assert json.loads(out.read_text(encoding="utf-8"))["forward_prefetch"] == 8


@pytest.mark.parametrize("name", ["--list", "-x"])
def test_a_case_name_that_reads_as_an_option_is_refused(tmp_path, capsys, name: str) -> None:
    config = (REPO / "config/reexec.yaml").read_text(encoding="utf-8")
    config = config.replace("    - {model: resnet50,", f'    - {{name: "{name}", model: resnet50,',
                            1)
    assert name in config
    (tmp_path / "r.yaml").write_text(config, encoding="utf-8")
    refused(["reexec", "run", "--config", str(tmp_path / "r.yaml"), "--list"], capsys,
            "r.yaml", "cases[0].name'", "with '.' or '-'")


@pytest.mark.parametrize("backend", ["nccl\nx", "a/b", "-nccl", "nccl\x1b[2J", ""])
def test_a_backend_label_with_a_newline_or_separator_is_refused(tmp_path, capsys,
                                                                backend: str) -> None:
    out = tmp_path / "x.csv"
    refused(["import", "nccl-tests", str(REPO / "data/external/nccl-tests/abci-inter-anode-2.txt"),
             "--backend", backend, "-o", str(out)], capsys, "argument --backend")
    assert not out.exists()


def test_study_sharded_refuses_a_case_given_twice(tmp_path, capsys) -> None:
    case = ["--case", "rn18", str(REPO / f"{COMPUTE}.csv"), "tbf1gbit", str(COMM), "2",
            "blocking"]
    refused(["study", "sharded", *case, *case, "-o", str(tmp_path / "s.csv")], capsys,
            "--case rn18", "given twice")
    assert not (tmp_path / "s.csv").exists()


def test_study_topology_check_refuses_a_sweep_given_twice(tmp_path, capsys) -> None:
    sweep = EXT / "nccl-abci-inter-anode-2.csv"  # the second time in another spelling
    refused(["study", "topology-check", "--intra", str(EXT / "nccl-abci-intra-anode-8.csv"),
             "--sweep", str(sweep), str(EXT / ".." / "external" / sweep.name),
             "-o", str(tmp_path / "s.csv")], capsys, "--sweep", "given twice")
    assert not (tmp_path / "s.csv").exists()


# ----------------------------------------------------------------------------- Kineto
def _events(doc: dict) -> list[dict]:
    return doc["traceEvents"]


def _string_ts(doc: dict) -> str:
    kernel = next(e for e in _events(doc) if e["cat"] == "kernel")
    kernel["ts"] = str(kernel["ts"])
    return f"traceEvents[{_events(doc).index(kernel)}].ts"


def _negative_step(doc: dict) -> str:
    _events(doc)[0]["name"] = "ProfilerStep#-3"
    return "traceEvents[0].name"


def _duplicate_correlation(doc: dict) -> str:
    launches = [e for e in _events(doc) if e["cat"] == "cuda_runtime"]
    launches[1]["args"]["correlation"] = launches[0]["args"]["correlation"]
    return f"traceEvents[{_events(doc).index(launches[1])}].args.correlation"


def _kernel_before_launch(doc: dict) -> str:
    kernel = next(e for e in _events(doc) if e["cat"] == "kernel")
    kernel["ts"] = 5  # its cudaLaunchKernel starts at 11 us
    return f"traceEvents[{_events(doc).index(kernel)}].ts"


KINETO = {"timestamp as a string": (_string_ts, "not a number"),
          "negative step number": (_negative_step, "step number"),
          "duplicate correlation id": (_duplicate_correlation, "correlation id"),
          "kernel before its launch": (_kernel_before_launch, "before the runtime call")}


@pytest.mark.parametrize("defect", list(KINETO))
def test_import_kineto_refuses_an_impossible_trace(tmp_path, capsys, defect: str) -> None:
    doc = synthetic_trace()
    plant, words = KINETO[defect]
    field = plant(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "out.csv"
    refused(["import", "kineto", str(path), "--compute-out", str(out), "--batch-size", "8"],
            capsys, "bad.json", f"field '{field}'", words)
    assert not out.exists()


@pytest.mark.parametrize("defect", ["timestamp as a string", "negative step number"])
def test_the_iterations_import_refuses_them_too(tmp_path, capsys, defect: str) -> None:
    doc = synthetic_trace()
    plant, words = KINETO[defect]
    field = plant(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    refused(["import", "kineto", str(path), "-o", str(tmp_path / "it")], capsys, "bad.json",
            f"field '{field}'", words)


def test_study_topology_replay_refuses_a_topology_named_twice(tmp_path, capsys) -> None:
    topo = str(REPO / "config/topologies/abci-a100-2x8-flat.yaml")
    refused(["study", "topology-replay", "--compute", "rn18", str(REPO / f"{COMPUTE}.csv"),
             "--topology", "two", topo, "flat", "--topology", "two", topo, "hierarchical",
             "-o", str(tmp_path / "s.csv")], capsys, "--topology two", "given twice")
    assert not (tmp_path / "s.csv").exists()
