"""What the Kineto GPU importer takes from recorded shapes: a parameter table matched to the
trace's gradients by ready_order or size rather than row order (our own H200 ViT-B/16 trace
and capture CSV, data/h200 and traces/compute/h200), and the batch size from the first
forward op's inputs (our own H200 BERT and GPT-2 traces, data/h200/kineto-steps)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces import ComputeTrace
from gradsched.traces.importers.kineto_gpu import Options, import_kineto_gpu
from gradsched.traces.importers.kineto_gpu.batch import batch_from_shapes
from gradsched.traces.importers.kineto_gpu.params import (
    BY_READY_ORDER,
    BY_SIZE,
    ROW_BY_ROW,
    match_table,
)

REPO = Path(__file__).resolve().parents[3]
STEPS = REPO / "data" / "h200" / "kineto-steps"
VIT = STEPS / "vit_b_16-b64-cuda-bf16.pt.trace.json.gz"
VIT_CAPTURE = REPO / "traces" / "compute" / "h200" / "vit_b_16-b64-cuda-bf16.csv"
GPU_CHECK = REPO / "data" / "h200" / "gpu-check" / "gpu-check-h200-20261127T144221Z.tar.gz"


def _import(tmp_path: Path, trace: Path, *extra: str) -> tuple[int, str]:
    out = tmp_path / "out.csv"
    code = main(["import", "kineto", str(trace), "--compute-out", str(out), *extra])
    return code, str(out)


# ------------------------------------------------------------------- parameter tables
def test_vit_capture_csv_is_matched_on_ready_order(tmp_path, capsys) -> None:
    """The capture lists ViT's parameters in its own order (conv_proj.weight first,
    class_token last); the trace's forward order differs. Matched on ready_order, every
    name lands on the gradient of the same size and accumulation order."""
    code, out = _import(tmp_path, VIT, "--params", str(VIT_CAPTURE))
    assert code == 0, capsys.readouterr().err
    imported = ComputeTrace.load(out)
    capture = ComputeTrace.load(VIT_CAPTURE)
    assert imported.names != capture.names  # not the capture's row order
    mine = imported.frame.set_index("name")
    theirs = capture.frame.set_index("name")
    assert sorted(mine.index) == sorted(theirs.index)
    assert (mine["numel"] == theirs.loc[mine.index, "numel"]).all()
    assert (mine["ready_order"] == theirs.loc[mine.index, "ready_order"]).all()
    assert (mine["bytes"] == theirs.loc[mine.index, "bytes"]).all()
    assert "matched on ready_order" in imported.meta["parameter_sizes"]


def test_the_refused_gpu_check_pair_now_imports(tmp_path, capsys) -> None:
    """The pair refused on 2026-11-27 ("row 'conv_proj.weight' has 589824 elements, the
    trace's gradient 0 (forward order) has 768"): the gpu-check archive's own ViT capture
    CSV and hook-free trace (data/h200/gpu-check/)."""
    import tarfile

    stem = "vit_b_16-b64-cuda-bf16"
    with tarfile.open(GPU_CHECK) as tar:
        for member in tar.getmembers():
            if member.name.endswith((f"compute/{stem}.csv", f"truth/{stem}.pt.trace.json")):
                (tmp_path / Path(member.name).name).write_bytes(
                    tar.extractfile(member).read())
    code, out = _import(tmp_path, tmp_path / f"{stem}.pt.trace.json", "--params",
                        str(tmp_path / f"{stem}.csv"))
    assert code == 0, capsys.readouterr().err
    names = ComputeTrace.load(out).names
    assert names[:3] == ["conv_proj.bias", "conv_proj.weight", "class_token"]


def test_vit_table_without_ready_order_is_ambiguous(tmp_path, capsys) -> None:
    table = tmp_path / "vit-names.csv"
    pd.read_csv(VIT_CAPTURE)[["name", "numel"]].to_csv(table, index=False)
    code, out = _import(tmp_path, VIT, "--params", str(table))
    err = capsys.readouterr().err
    assert code == 2 and not Path(out).exists()
    assert "vit-names.csv, line 2, row 1, field 'numel'" in err
    assert "'conv_proj.weight'" in err and "cannot be told apart" in err
    assert "ready_order" in err and "Traceback" not in err


@pytest.mark.parametrize("column, value, match", [
    ("numel", 12345, r"row 6, field 'numel'.*in_proj_bias.*12345 elements.*has 2304"),
    ("ready_order", 999, r"row 6, field 'ready_order'.*ready_order 999 is not one of"),
    ("ready_order", 150, r"row 6, field 'ready_order'.*ready_order 150 occurs twice"),
    ("ready_order", -1, r"row 6, field 'ready_order'.*must be an integer >= 0"),
])
def test_bad_table_rows_are_named(tmp_path, column, value, match) -> None:
    table = pd.read_csv(VIT_CAPTURE)
    table.loc[5, column] = value
    path = tmp_path / "bad.csv"
    table.to_csv(path, index=False)
    with pytest.raises(InputError, match=match):
        import_kineto_gpu(VIT, Options(params=str(path)))


def _frame(sizes: list[int]) -> pd.DataFrame:
    """SYNTHETIC trace rows (forward order): sizes and ready order (the reverse)."""
    return pd.DataFrame({"trace_numel": sizes, "ready_order": range(len(sizes))[::-1]})


def test_match_row_by_row_then_by_unique_size() -> None:
    frame = _frame([100, 10, 50])
    table = pd.DataFrame({"name": ["a", "b", "c"], "numel": [100, 10, 50]})
    assert match_table(frame, table, "t.csv") == ([0, 1, 2], ROW_BY_ROW)
    shuffled = pd.DataFrame({"name": ["c", "a", "b"], "numel": [50, 100, 10]})
    assert match_table(frame, shuffled, "t.csv") == ([1, 2, 0], BY_SIZE)
    ordered = shuffled.assign(ready_order=[0, 2, 1])
    assert match_table(frame, ordered, "t.csv") == ([1, 2, 0], BY_READY_ORDER)
    with pytest.raises(InputError, match=r"row 1, field 'numel'.*'c' has 51 elements: none "):
        match_table(frame, shuffled.assign(numel=[51, 100, 10]), "t.csv")
    twice = pd.DataFrame({"name": ["c", "a", "b"], "numel": [50, 100, 100]})
    with pytest.raises(InputError, match=r"row 3, field 'numel'.*'b' has 100 elements: only 1"):
        match_table(frame, twice, "t.csv")


# ------------------------------------------------------------------- batch size
@pytest.mark.parametrize("stem, batch", [
    ("bert-base-s128-b32-cuda-bf16", 32), ("bert-large-s128-b16-cuda-bf16", 16),
    ("gpt2-s1024-b8-cuda-fp32", 8), ("resnet50-b64-cuda-fp32", 64),
])
def test_batch_size_from_the_first_forward_ops_inputs(stem, batch) -> None:
    """BERT and GPT-2 start with an embedding of [batch, sequence] ids, CNNs with a
    convolution: no batch_size needed."""
    trace = import_kineto_gpu(STEPS / f"{stem}.pt.trace.json.gz", Options()).compute
    assert trace.meta["batch_size"] == batch


class _Span:
    def __init__(self, name, dims):
        self.name, self.args = name, {"Input Dims": dims}


class _Op:
    def __init__(self, name, dims):
        self.span = _Span(name, dims)


def test_batch_size_not_said_by_the_shapes_is_explained() -> None:
    """SYNTHETIC first ops: what they say, and why not."""
    assert batch_from_shapes([_Op("aten::embedding", [[50257, 768], [8, 1024]])])[0] == 8
    assert batch_from_shapes([_Op("aten::conv2d", [[4, 3, 32, 32], [8, 3, 3, 3]])])[0] == 4
    batch, why = batch_from_shapes([_Op("aten::embedding", [[100, 8], [4096]])])
    assert batch is None and "no usable input shape" in why
    batch, why = batch_from_shapes([_Op("aten::linear", [[8, 16], [4, 16]])])
    assert batch is None and "neither a convolution nor an embedding" in why
    assert batch_from_shapes([]) == (None, "the step has no forward op")


def test_missing_batch_size_error_names_the_first_op(tmp_path, capsys) -> None:
    """A trace without shapes: the error says why, names the file and the field."""
    import gzip
    import json

    with gzip.open(STEPS / "bert-base-s128-b32-cuda-bf16.pt.trace.json.gz") as fh:
        doc = json.loads(fh.read())
    for event in doc["traceEvents"]:
        if event.get("name") == "aten::embedding":
            event.get("args", {}).pop("Input Dims", None)
    path = tmp_path / "no-shapes.json"
    path.write_text(json.dumps(doc))
    code, out = _import(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 2 and not Path(out).exists()
    assert "no-shapes.json, field 'batch_size'" in err
    assert "first forward op aten::embedding records no usable input shape" in err
    assert "--batch-size" in err and "Traceback" not in err
