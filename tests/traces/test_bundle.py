"""The trace bundle format: load errors name file, row and field; committed traces load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.traces import CommTrace, ComputeTrace, meta_path
from gradsched.traces.importers.kineto_gpu import RECORD_KIND, CommRecord

REPO = Path(__file__).resolve().parents[2]

COMPUTE_CSV = """\
name,layer,numel,bytes,forward_s,backward_s,ready_order
conv1.weight,0,9408,37632,0.0001,0.0003,2
conv1.bias,0,64,256,0,0,1
fc.weight,1,1000,4000,0.0002,0.0004,0
"""
COMPUTE_META = {
    "kind": "compute", "model": "toy", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "handwritten test input",
    "iterations": None, "date": "2026-11-23", "source": "test (not a measurement)",
}
COMM_CSV = """\
collective,backend,algorithm,world_size,nodes,in_place,bytes,time_s,time_min_s,time_max_s
all_reduce,nccl,default,8,1,0,4,1e-05,9e-06,2e-05
all_reduce,nccl,default,8,1,0,8,1.1e-05,1e-05,2e-05
all_reduce,nccl,default,8,1,1,4,1.2e-05,1e-05,2e-05
"""
COMM_META = {"kind": "comm", "source": "test (not a measurement)", "hardware": "none",
             "statistic": "mean"}


def _bundle(tmp_path: Path, csv: str, meta: dict, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(csv, encoding="utf-8")
    meta_path(path).write_text(json.dumps(meta), encoding="utf-8")
    return path


def _edit(csv: str, row: int, column: str, value: str) -> str:
    """Set one cell (row 1 = first data row)."""
    lines = csv.splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    return "\n".join(lines) + "\n"


def _assert_names(err: pytest.ExceptionInfo[InputError], path: Path, row: int | None,
                  field: str | None) -> None:
    text = str(err.value)
    assert str(path) in text
    assert err.value.field == field
    if field is not None:
        assert f"field '{field}'" in text
    if row is not None:
        assert err.value.row == row and f"row {row}" in text
        assert err.value.line == row + 1


def test_valid_bundles_load(tmp_path: Path) -> None:
    compute = ComputeTrace.load(_bundle(tmp_path, COMPUTE_CSV, COMPUTE_META, "c.csv"))
    assert compute.n_tensors == 3 and compute.frame["update_s"].eq(0).all()
    comm = CommTrace.load(_bundle(tmp_path, COMM_CSV, COMM_META, "m.csv"))
    assert len(comm.series()) == 2


@pytest.mark.parametrize(
    ("row", "column", "value", "match"),
    [
        (2, "layer", "abc", "not an integer"),
        (1, "backward_s", "nan", "not a finite number"),
        (2, "forward_s", "-0.1", "at least 0"),
        (3, "numel", "0", "greater than zero"),
        (1, "bytes", "0", "greater than zero"),
        (2, "name", "conv1.weight", "duplicate tensor name"),
        (2, "ready_order", "2", "permutation"),
        (3, "ready_order", "7", "permutation"),
        (3, "layer", "-1", "at least 0"),
        (2, "layer", "1", "layer decreases"),
        (1, "bytes", "28224", "not an element size"),
        (1, "backward_s", " 0.1", "surrounding spaces"),
        (2, "numel", "", "empty value"),
    ],
)
def test_compute_cell_errors(tmp_path: Path, row: int, column: str, value: str,
                             match: str) -> None:
    csv = _edit(COMPUTE_CSV, row, column, value)
    if column == "layer" and value == "1":  # a decrease needs a later, smaller layer
        csv = _edit(csv, 3, "layer", "0")
        row = 3
    path = _bundle(tmp_path, csv, COMPUTE_META)
    with pytest.raises(InputError, match=match) as err:
        ComputeTrace.load(path)
    _assert_names(err, path, row, column)


def test_compute_missing_and_unknown_columns(tmp_path: Path) -> None:
    missing = "\n".join(",".join(line.split(",")[:3] + line.split(",")[4:])
                        for line in COMPUTE_CSV.splitlines()) + "\n"
    path = _bundle(tmp_path, missing, COMPUTE_META)
    with pytest.raises(InputError, match="required column is missing") as err:
        ComputeTrace.load(path)
    assert err.value.field == "bytes" and err.value.line == 1 and str(path) in str(err.value)
    extra = "\n".join(line + (",x_s" if i == 0 else ",1")
                      for i, line in enumerate(COMPUTE_CSV.splitlines())) + "\n"
    path = _bundle(tmp_path, extra, COMPUTE_META)
    with pytest.raises(InputError, match="unknown column") as err:
        ComputeTrace.load(path)
    assert err.value.field == "x_s" and err.value.line == 1


def test_compute_bad_meta(tmp_path: Path) -> None:
    path = _bundle(tmp_path, COMPUTE_CSV, {**COMPUTE_META, "batch_size": "64"})
    with pytest.raises(InputError) as err:
        ComputeTrace.load(path)
    assert err.value.field == "batch_size" and str(meta_path(path)) in str(err.value)
    meta = dict(COMPUTE_META)
    del meta["model"]
    path = _bundle(tmp_path, COMPUTE_CSV, meta)
    with pytest.raises(InputError, match="'model' is a required property"):
        ComputeTrace.load(path)
    meta_path(path).write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON") as err:
        ComputeTrace.load(path)
    assert err.value.line == 1
    meta_path(path).unlink()
    with pytest.raises(InputError, match="sidecar is missing"):
        ComputeTrace.load(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        ComputeTrace.load(tmp_path / "nope.csv")
    path = _bundle(tmp_path, COMPUTE_CSV.splitlines()[0] + "\n", COMPUTE_META)
    with pytest.raises(InputError, match="no data rows"):
        ComputeTrace.load(path)


@pytest.mark.parametrize(
    ("row", "column", "value", "match"),
    [
        (1, "time_s", "-1e-05", "greater than zero"),
        (2, "time_s", "nan", "not a finite number"),
        (1, "bytes", "0", "greater than zero"),
        (2, "collective", "alltoall", "not one of"),
        (3, "in_place", "yes", "not a boolean"),
        (3, "nodes", "9", "nodes is larger than world_size"),
        (1, "time_min_s", "5e-05", "time_min_s is larger than time_s"),
        (2, "time_max_s", "1e-06", "time_max_s is smaller than time_s"),
        (2, "bytes", "4", "duplicate measurement key"),
        (2, "bytes", "2", "not sorted"),
    ],
)
def test_comm_cell_errors(tmp_path: Path, row: int, column: str, value: str,
                          match: str) -> None:
    path = _bundle(tmp_path, _edit(COMM_CSV, row, column, value), COMM_META)
    with pytest.raises(InputError, match=match) as err:
        CommTrace.load(path)
    field = "bytes" if match in ("not sorted", "duplicate measurement key") else column
    _assert_names(err, path, row, field)


def test_comm_bad_meta(tmp_path: Path) -> None:
    path = _bundle(tmp_path, COMM_CSV, {**COMM_META, "statistic": "p50"})
    with pytest.raises(InputError) as err:
        CommTrace.load(path)
    assert err.value.field == "statistic" and str(meta_path(path)) in str(err.value)


def test_save_round_trip_is_deterministic(tmp_path: Path) -> None:
    trace = CommTrace.load(_bundle(tmp_path, COMM_CSV, COMM_META, "in.csv"))
    trace.save(tmp_path / "a.csv")
    trace.save(tmp_path / "b.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert CommTrace.load(tmp_path / "a.csv").frame.equals(trace.frame)


COMMITTED = sorted((REPO / "traces").glob("**/*.csv"))


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(REPO)) for p in COMMITTED])
def test_committed_trace_loads(path: Path) -> None:
    meta = json.loads(meta_path(path).read_text(encoding="utf-8"))
    if meta["kind"] == RECORD_KIND:  # collectives of one run (kineto_gpu), not a sweep
        trace = CommRecord.load(path)
    else:
        trace = ComputeTrace.load(path) if meta["kind"] == "compute" else CommTrace.load(path)
    assert len(trace.frame) > 0
    assert meta.get("original_file") or meta.get("source")
    # no machine path (the checkout's parent folder) leaks into the provenance
    assert str(REPO.parent) + "/" not in meta_path(path).read_text(encoding="utf-8")


def test_some_traces_are_committed() -> None:
    assert len(COMMITTED) >= 46


def test_the_falling_check_reads_the_fastest_repetition_where_there_is_one(tmp_path) -> None:
    """A SYNTHETIC sweep whose 4-byte median was slowed several-fold by load, while its
    fastest repetitions rise with size: accepted; the same with falling fastest repetitions:
    refused, naming time_min_s."""
    import pandas as pd
    import pytest

    from gradsched.errors import InputError
    from gradsched.traces.bundle import _check_comm_trend

    sizes = [4, 32, 256, 2048, 16384, 131072, 1048576]
    base = pd.DataFrame({"collective": "all_reduce", "backend": "gloo", "algorithm": "default",
                         "world_size": 2, "nodes": 1, "in_place": 1, "bytes": sizes})
    slowed = base.assign(time_s=[3.7e-3, 4e-4, 4e-4, 4.5e-4, 5e-4, 6e-4, 6.6e-4],
                         time_min_s=[3e-4, 3e-4, 3.1e-4, 3.5e-4, 4e-4, 5e-4, 6e-4])
    _check_comm_trend(slowed, tmp_path / "ok.csv")
    falling = slowed.assign(time_min_s=[3e-3, 2e-3, 1e-3, 8e-4, 6e-4, 4e-4, 2e-4])
    with pytest.raises(InputError, match="time_min_s"):
        _check_comm_trend(falling, tmp_path / "bad.csv")
