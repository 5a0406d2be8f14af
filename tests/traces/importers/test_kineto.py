"""The Kineto importer on a REAL profile (2 gloo ranks, DDP, tiny model) captured here, on a
small hand-written GPU-style trace (labelled synthetic: no GPU on the test machine), and on
malformed files."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces.importers.kineto import (
    import_kineto,
    normalise_collective,
    parse_kineto,
)
from gradsched.traces.importers.kineto.intervals import intersection_length, subtract, union

TINY_MLP_GRAD_BYTES = (64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10) * 4


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """Two gloo ranks of DDP on tiny-mlp, bucket cap 0.02 MB, 3 profiled steps."""
    pytest.importorskip("torch")
    from gradsched.capture.iteration import IterationOptions, capture_iterations

    out = tmp_path_factory.mktemp("iter") / "tiny"
    opts = IterationOptions(model="tiny-mlp", batch_size=16, world_size=2,
                            bucket_caps_mb=[0.02], iters=3, warmup=1, deadline_s=240)
    summary = capture_iterations(opts, out)
    return out, summary


def test_capture_iteration_writes_traces_and_summary(profiled):
    out, summary = profiled
    traces = sorted(p.name for p in (out / "bucket-0.02mb").iterdir())
    assert traces == ["rank0.json.gz", "rank1.json.gz"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no staging left
    meta = json.loads((out / "meta.json").read_text())
    assert meta["gradient_bytes"] == TINY_MLP_GRAD_BYTES
    on_disk = pd.read_csv(out / "summary.csv")
    assert len(on_disk) == len(summary) == 2 * 3
    assert (on_disk["all_reduce_bytes"] == TINY_MLP_GRAD_BYTES).all()
    assert (on_disk["wall_s"] > 0).all()


def test_real_profile_iterations_and_collectives(profiled):
    out, _ = profiled
    result = import_kineto([out / "bucket-0.02mb" / f"rank{r}.json.gz" for r in (0, 1)])
    its = result.iterations
    assert sorted(its["rank"].unique().tolist()) == [0, 1]
    assert (its.groupby("rank").size() == 3).all()
    assert (its["iteration_s"] > 0).all()
    assert (its["overlap_s"] >= 0).all() and (its["overlap_s"] <= its["comm_s"] + 1e-12).all()
    assert its["exposed_comm_s"].tolist() == pytest.approx(
        (its["comm_s"] - its["overlap_s"]).tolist(), abs=1e-9)
    coll = result.collectives
    assert (coll["source"] == "gloo").all()
    assert (coll["duration_s"] > 0).all()
    assert (coll["recorded_duration_s"] >= coll["duration_s"]).all()
    assert (coll["world_size"] == 2).all()
    ar = coll[coll["collective"] == "all_reduce"]
    per_iter = ar.groupby(["rank", "iteration"])
    # DDP buckets: with a 0.02 MB cap the 104 KB of gradients go in several buckets, and
    # the all-reduced bytes of every iteration add up to the model's gradient bytes.
    assert (per_iter["bytes"].sum() == TINY_MLP_GRAD_BYTES).all()
    assert (per_iter.size() >= 2).all()
    assert set(ar["dtype"]) == {"float"}
    assert {f["world_size"] for f in result.meta()["files"]} == {2}


def test_cli_import_kineto(profiled, tmp_path, capsys):
    out, _ = profiled
    prefix = tmp_path / "ddp"
    code = main(["import", "kineto", str(out / "bucket-0.02mb" / "rank0.json.gz"),
                 "-o", str(prefix)])
    assert code == 0
    assert "3 iterations" in capsys.readouterr().out
    its = pd.read_csv(f"{prefix}.iterations.csv")
    assert list(its.columns)[:8] == ["file", "rank", "iteration", "start_s", "end_s",
                                     "iteration_s", "comm_s", "overlap_s"]
    assert its["start_s"].iloc[0] == 0
    coll = pd.read_csv(f"{prefix}.collectives.csv")
    assert {"iteration", "collective", "bytes", "world_size", "start_s", "duration_s",
            "stream"} <= set(coll.columns)
    meta = json.loads((tmp_path / "ddp.meta.json").read_text())
    assert meta["importer"] == "kineto"


# ----------------------------------------------------------------------------- synthetic
def _x(name, ts, dur, cat="cpu_op", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def synthetic_gpu_trace():
    """SYNTHETIC (hand-written, not measured): two steps, NCCL kernels on stream 20
    overlapping compute kernels on stream 7, metadata on the kernel or via External id."""
    meta = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
            "Group size": 4, "dtype": "Float"}
    events = [
        _x("ProfilerStep#5", 0, 1000, cat="user_annotation"),
        _x("ProfilerStep#6", 1000, 1000, cat="user_annotation"),
        _x("aten::mm", 10, 50),
        _x("record_param_comms", 100, 5, **{"External id": 77, **meta, "dtype": "BFloat16"}),
        _x("sgemm", 100, 300, cat="kernel", tid=7, stream=7),
        _x("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 300, 200, cat="kernel",
           tid=20, stream=20, **meta),
        _x("ncclKernel_AllReduce_RING_LL_Sum_bfloat16", 600, 100, cat="kernel", tid=20,
           stream=20, **{"External id": 77}),
        _x("sgemm", 1100, 100, cat="kernel", tid=7, stream=7),
        _x("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", 1150, 100, cat="kernel", tid=20,
           stream=20, **{"Collective name": "_allgather_base", "In msg nelems": 10,
                         "Out msg nelems": 40, "Group size": 4, "dtype": "Float"}),
        _x("ncclDevKernel_Broadcast(ncclDevComm*)", 2500, 10, cat="kernel", tid=20),
    ]
    return {"traceEvents": events, "distributedInfo": {"backend": "nccl", "rank": 3,
                                                       "world_size": 4}}


def test_gpu_style_trace_bytes_and_overlap():
    f = parse_kineto(synthetic_gpu_trace(), "synthetic.json")
    assert f.source == "nccl-kernel" and f.rank == 3 and f.world_size == 4
    coll = f.collectives
    assert coll["collective"].tolist() == ["all_reduce", "all_reduce", "all_gather"]
    # Float: 1000 x 4; BFloat16 via External id: 1000 x 2; all_gather: max(in, out) x 4
    assert coll["bytes"].tolist() == [4000, 2000, 160]
    assert coll["stream"].tolist() == ["stream 20"] * 3
    assert coll["duration_s"].tolist() == pytest.approx([200e-6, 100e-6, 100e-6])
    its = f.iterations.set_index("iteration")
    assert its.loc[5, "comm_s"] == pytest.approx(300e-6)
    assert its.loc[5, "overlap_s"] == pytest.approx(100e-6)  # sgemm 100-400 vs nccl 300-500
    assert its.loc[6, "overlap_s"] == pytest.approx(50e-6)
    assert its.loc[6, "comm_bytes"] == 160
    assert any("outside every ProfilerStep" in w for w in f.warnings)  # the broadcast


def test_interval_helpers_and_names():
    a = union([(0, 5), (3, 8), (10, 12), (12, 13)])
    assert a == [(0, 8), (10, 13)]
    assert subtract(a, [(2, 3), (7, 11)]) == [(0, 2), (3, 7), (11, 13)]
    assert intersection_length(a, [(4, 11)]) == 5
    assert normalise_collective("_allgather_base") == "all_gather"
    assert normalise_collective("allreduce") == "all_reduce"
    assert normalise_collective("reduce_scatter_tensor") == "reduce_scatter"


# ----------------------------------------------------------------------------- malformed
@pytest.mark.parametrize(("content", "match"), [
    ("", "empty file"),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', r"line 1: not valid JSON"),
    ('{"events": []}', "field 'traceEvents'"),
    ('{"traceEvents": {}}', "must be a list"),
    ('{"traceEvents": [1]}', r"field 'traceEvents\[0\]'"),
    ('{"traceEvents": [{"ph": "M"}, {"ph": "X", "name": "a", "ts": 1}]}',
     r"field 'traceEvents\[1\].dur'"),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": "x", "dur": 1}]}',
     r"field 'traceEvents\[0\].ts'"),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -2}]}', "negative duration"),
    ('{"traceEvents": [{"ph": "X", "name": "ncclKernel_AllReduce", "cat": "kernel", "ts": 1, '
     '"dur": 2, "args": {"Collective name": "allreduce", "In msg nelems": "many"}}]}',
     r"field 'traceEvents\[0\].args.In msg nelems'"),
    ('{"traceEvents": []}', "no complete"),
])
def test_malformed_files_name_file_and_field(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError, match=match) as info:
        import_kineto([path])
    assert str(path) in str(info.value)


def test_corrupt_gzip_and_missing_file(tmp_path, capsys):
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}')[:15])
    with pytest.raises(InputError, match="corrupt gzip"):
        import_kineto([path])
    code = main(["import", "kineto", str(tmp_path / "nope.json"), "-o", str(tmp_path / "x")])
    assert code == 2
    assert "file not found" in capsys.readouterr().err
    assert not list(tmp_path.glob("x.*"))


def test_trace_without_steps_is_one_iteration_with_a_warning():
    doc = {"traceEvents": [_x("aten::mm", 0, 10), _x("gloo:all_reduce", 5, 20, tid=2,
                                                      **{"Input Dims": [[4, 2]],
                                                         "Input type": ["float"]})]}
    f = parse_kineto(doc, "nosteps.json")
    assert len(f.iterations) == 1 and f.iterations.loc[0, "n_collectives"] == 1
    assert f.collectives.loc[0, "bytes"] == 32
    assert any("no ProfilerStep" in w for w in f.warnings)
