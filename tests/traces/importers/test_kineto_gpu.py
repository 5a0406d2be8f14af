"""The Kineto GPU importer on the shipped public traces (data/external: HTA, PARAM, kineto),
on a small hand-written trace (labelled SYNTHETIC) and on bad input."""

from __future__ import annotations

import copy
import gzip
import io
import json
import re
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces import ComputeTrace
from gradsched.traces.importers.kineto_gpu import (
    CommRecord,
    Options,
    import_kineto_gpu,
    parse_gpu_step,
)

REPO = Path(__file__).resolve().parents[3]
RESNET50_PARAMS = REPO / "traces" / "compute" / "cpu" / "resnet50-b32-cpu-fp32.csv"
DDP = "hta/nccl_parser_config/nccl_data.json.gz"
V100 = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
OLD = "kineto/worker0.1623143089861.pt.trace.json.gz"
DLRM = "param/dlrm_kineto.tar.gz"
RESNET50_ELEMENTS = 25_557_032
DDP_BUCKETS = [2_049_000, 7_875_584, 6_563_840, 6_637_568, 2_431_040]


def external(relative: str) -> Path:
    """A shipped raw file: ``data/external`` of this checkout, else ``../shared/data/external``
    beside it; skip only when neither has it."""
    for root in (REPO / "data" / "external", REPO.parent / "shared" / "data" / "external"):
        if (root / relative).is_file():
            return root / relative
    pytest.skip(f"{relative} is in neither data/external nor ../shared/data/external")


def resnet50(path: str, **kw) -> Options:
    return Options(model="resnet50", params=str(RESNET50_PARAMS), batch_size=32, **kw)


# ----------------------------------------------------------------------------- shipped files
@pytest.fixture(scope="module")
def ddp():
    return import_kineto_gpu(external(DDP), resnet50(DDP))


def test_ddp_resnet50_five_buckets_in_launch_order(ddp):
    rec = ddp.comm_record.frame
    ar = rec[rec["collective"] == "all_reduce"]
    assert ar["nelems"].tolist() == DDP_BUCKETS
    assert int(ar["nelems"].sum()) == RESNET50_ELEMENTS
    assert ar["launch_order"].is_monotonic_increasing
    assert ar["start_after_backward_s"].is_monotonic_increasing
    assert (ar["start_after_backward_s"] > 0).all()  # buckets go out during the backward
    assert (ar["bytes"] == ar["nelems"] * 4).all() and (ar["world_size"] == 2).all()
    # DDP's buffer broadcasts precede the backward; they are not buckets
    assert set(rec.loc[rec["start_after_backward_s"] < 0, "collective"]) == {"broadcast"}
    buckets = ddp.compute.meta["ddp_buckets"]
    assert buckets["partition_ready_order"] and buckets["gradients_per_bucket"][0] == 2
    assert sum(buckets["gradients_per_bucket"]) == ddp.compute.n_tensors == 161


def test_ddp_trace_is_reported_cpu_bound(ddp):
    meta = ddp.compute.meta
    assert meta["cpu_bound"] is True
    assert 0.10 < meta["gpu_busy_share"] < 0.25
    assert 0.035 < meta["gpu_busy_s"] < 0.045 and 0.20 < meta["iteration_s"] < 0.23
    assert any("CPU-bound" in w.message for w in ddp.warnings)
    assert any("CPU-bound" in w for w in meta["warnings"])
    # the rows are GPU kernel time, well under the step's wall time
    assert ddp.compute.forward_total_s + ddp.compute.backward_total_s < meta["gpu_busy_s"]


def test_v100_resnet50_is_gpu_bound_30_plus_62_ms():
    result = import_kineto_gpu(external(V100), resnet50(V100))
    trace, meta = result.compute, result.compute.meta
    assert meta["cpu_bound"] is False and meta["gpu_busy_share"] > 0.95
    assert meta["step"] == 104 and meta["steps_in_trace"] == [101, 102, 103, 104, 105]
    assert trace.forward_total_s == pytest.approx(0.030, abs=0.002)
    assert trace.backward_total_s == pytest.approx(0.062, abs=0.002)
    assert meta["device"] == "Tesla V100-SXM2-32GB"
    assert trace.total_bytes == RESNET50_ELEMENTS * 4
    assert not [w for w in result.warnings if "CPU-bound" in w.message]
    # backward: the first-ready gradient (fc.bias) carries the loss's backward too
    ready = trace.ready_sequence()
    assert ready["name"].tolist()[:2] == ["fc.bias", "fc.weight"]
    assert ready["name"].iloc[-1] == "conv1.weight"


def test_step_option_and_unknown_step():
    path = external(V100)
    result = import_kineto_gpu(path, resnet50(V100, step=103))
    assert result.compute.meta["step"] == 103
    with pytest.raises(InputError, match=r"no ProfilerStep#7 \(the trace has steps 101"):
        import_kineto_gpu(path, resnet50(V100, step=7))


def test_old_schema_shapes_agree_with_the_parameter_table():
    """kineto sample (cat Operator/Kernel/Runtime, record_shapes): the AccumulateGrad shapes
    must match torchvision ResNet-50's parameters row by row, and give batch 32."""
    result = import_kineto_gpu(external(OLD), Options(model="resnet50",
                                                      params=str(RESNET50_PARAMS)))
    trace = result.compute
    table = pd.read_csv(RESNET50_PARAMS)
    assert trace.frame["numel"].tolist() == table["numel"].tolist()
    assert trace.meta["batch_size"] == 32 and "checked row by row" in trace.meta[
        "parameter_sizes"]
    assert 0.025 < trace.forward_total_s < 0.040 and 0.055 < trace.backward_total_s < 0.075
    assert trace.meta["cpu_bound"] is True  # data-loader bound: GPU busy ~57 %


def test_parameter_table_that_disagrees_is_refused(tmp_path):
    table = pd.read_csv(RESNET50_PARAMS)[["name", "numel"]]
    table.loc[5, "numel"] += 1
    bad = tmp_path / "params.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(InputError, match=r"row 6.*field 'numel'"):
        import_kineto_gpu(external(OLD), Options(params=str(bad)))
    with pytest.raises(InputError, match="has 160 rows"):
        table.iloc[:160].to_csv(bad, index=False)
        import_kineto_gpu(external(DDP), Options(params=str(bad), batch_size=32))


def test_dlrm_eight_ranks_align_on_one_step():
    result = import_kineto_gpu(external(DLRM), Options(model="dlrm", batch_size=1))
    rec, meta = result.comm_record.frame, result.comm_record.meta
    assert meta["ranks"] == list(range(8))
    assert sorted(rec["rank"].unique()) == list(range(8))
    assert (rec.groupby("rank").size() == 8).all()
    align = meta["alignment"]
    assert align["common_sequence"] == [
        "all_to_all:6144", "all_to_all:24", "all_to_all:384", "all_to_all:3392",
        "all_reduce:394241", "all_to_all:6144", "all_reduce:112", "all_reduce:226960"]
    # the 8 files share one host clock: offsets of a few microseconds at most, and after
    # alignment every collective ends within 0.1 ms of rank 0's
    assert max(abs(v) for v in align["clock_offset_s"].values()) < 1e-4
    assert max(align["max_residual_s"].values()) < 1e-4
    assert (rec["world_size"] == 8).all() and (rec["iteration"] == 10).all()
    assert result.compute.meta["rank"] == 0 and result.compute.meta["archive_member"].endswith(
        ".pt.trace.json")


# ----------------------------------------------------------------------------- synthetic
def _x(name, ts, dur, cat="cpu_op", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def synthetic_trace() -> dict:
    """SYNTHETIC (hand-written, not measured), new schema: one step, a linear layer (weight
    and bias) then a ReLU then a second linear layer's weight; backward on thread 2."""
    ev = [_x("ProfilerStep#3", 0, 1000, cat="user_annotation")]
    corr = iter(range(100, 200))

    def op(name, ts, dur, tid, kernel_us, kernel_ts, **args):
        c = next(corr)
        out = [_x(name, ts, dur, tid=tid, **args),
               _x("cudaLaunchKernel", ts + 1, 1, cat="cuda_runtime", tid=tid, correlation=c)]
        if kernel_us:
            out.append(_x(f"k_{name}", kernel_ts, kernel_us, cat="kernel", tid=7, correlation=c,
                          stream=7))
        return out

    ev += op("aten::linear", 10, 5, 1, 40, 20, **{"Sequence number": 1, "Fwd thread id": 0})
    ev += op("aten::relu", 20, 5, 1, 10, 60, **{"Sequence number": 2, "Fwd thread id": 0})
    ev += op("aten::linear", 30, 5, 1, 30, 70, **{"Sequence number": 3, "Fwd thread id": 0})
    ev += op("aten::mse_loss", 40, 5, 1, 5, 100, **{"Sequence number": 4, "Fwd thread id": 0})
    bw = {"Fwd thread id": 1}
    ev += op("autograd::engine::evaluate_function: MseLossBackward0", 200, 5, 2, 7, 300,
             **{"Sequence number": 4, **bw})
    ev += op("autograd::engine::evaluate_function: MmBackward0", 210, 5, 2, 60, 310,
             **{"Sequence number": 3, **bw})
    ev += op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 220, 5,
             2, 3, 380)
    ev += op("autograd::engine::evaluate_function: ReluBackward0", 230, 5, 2, 20, 390,
             **{"Sequence number": 2, **bw})
    ev += op("autograd::engine::evaluate_function: AddmmBackward0", 240, 5, 2, 80, 420,
             **{"Sequence number": 1, **bw})
    ev += op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 250, 5,
             2, 2, 510)
    ev += op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 260, 5,
             2, 0, 0)
    ev += op("aten::empty", 270, 5, 2, 4, 520)  # after the last gradient: the tail
    ev.append(_x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 400, 50, cat="kernel", tid=20,
                 correlation=999, stream=20, **{"Collective name": "allreduce",
                                                "In msg nelems": 10, "Out msg nelems": 10,
                                                "Group size": 4, "dtype": "Float"}))
    ev.append(_x("cudaLaunchKernel", 226, 1, cat="cuda_runtime", tid=2, correlation=999))
    return {"traceEvents": ev, "distributedInfo": {"rank": 0, "world_size": 4}}


def _params(tmp_path: Path) -> str:
    path = tmp_path / "params.csv"
    pd.DataFrame({"name": ["fc1.weight", "fc1.bias", "fc2.weight"],
                  "numel": [100, 10, 50]}).to_csv(path, index=False)
    return str(path)


def test_synthetic_attribution(tmp_path):
    g = parse_gpu_step(synthetic_trace(), "synthetic.json", Options())
    frame = g.frame
    # forward order: linear 1 (two params, reverse of accumulation), then linear 2
    assert frame["layer"].tolist() == [0, 0, 1]
    assert frame["ready_order"].tolist() == [2, 1, 0]
    # backward: first ready = loss + MmBackward + its AccumulateGrad = 7 + 60 + 3 us;
    # then ReLU + Addmm backward + AccumulateGrad = 20 + 80 + 2; then nothing (0)
    assert frame["backward_s"].tolist() == pytest.approx([0.0, 102e-6, 70e-6])
    # forward: linear 1 = 40; relu + linear 2 = 40, plus the loss (tail) 5 on the last owner
    assert frame["forward_s"].tolist() == pytest.approx([40e-6, 0.0, 45e-6])
    assert g.totals["backward_tail_s"] == pytest.approx(4e-6)
    assert g.totals["forward_tail_s"] == pytest.approx(5e-6)
    (coll,) = g.collectives
    assert (coll.collective, coll.nelems, coll.nbytes, coll.group) == ("all_reduce", 10, 40, 4)
    assert (coll.kernel.ts - g.backward_start_us) == 100


def test_synthetic_cli_writes_compute_and_comm(tmp_path, capsys):
    src = tmp_path / "synthetic.json"
    src.write_text(json.dumps(synthetic_trace()))
    out, comm = tmp_path / "c.csv", tmp_path / "m.csv"
    code = main(["import", "kineto", str(src), "--compute-out", str(out), "--comm-out",
                 str(comm), "--params", _params(tmp_path), "--batch-size", "8"])
    assert code == 0, capsys.readouterr().err
    trace = ComputeTrace.load(out)
    assert trace.names == ["fc1.weight", "fc1.bias", "fc2.weight"]
    assert trace.meta["world_size"] == 4 and trace.meta["batch_size"] == 8
    record = CommRecord.load(comm)
    assert record.frame.loc[0, "start_after_backward_s"] == pytest.approx(100e-6)
    assert record.meta["kind"] == "kineto-comm-record"
    (tmp_path / "m.meta.json").write_text(json.dumps({"kind": "comm"}))
    with pytest.raises(InputError, match="sidecar kind"):
        CommRecord.load(comm)


# ----------------------------------------------------------------------------- bad input
def _write(tmp_path: Path, doc) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return path


def _cli_fails(tmp_path, path, capsys, *extra) -> str:
    out = tmp_path / "out.csv"
    code = main(["import", "kineto", str(path), "--compute-out", str(out), "--comm-out",
                 str(tmp_path / "comm.csv"), *extra])
    assert code == 2
    assert not list(tmp_path.glob("out*")) and not list(tmp_path.glob("comm*"))
    return capsys.readouterr().err


def test_truncated_gzip_names_the_byte(tmp_path, capsys):
    raw = gzip.compress(json.dumps(synthetic_trace()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(raw[: len(raw) // 2])
    err = _cli_fails(tmp_path, path, capsys)
    assert str(path) in err and f"ends at byte {len(raw) // 2}" in err


def test_truncated_json_names_line_and_character(tmp_path, capsys):
    text = json.dumps(synthetic_trace())
    path = tmp_path / "cut.json"
    path.write_text(text[:500])
    err = _cli_fails(tmp_path, path, capsys)
    assert str(path) in err and "line 1" in err and "character" in err


def test_truncated_tar_member_is_named(tmp_path):
    path = tmp_path / "ranks.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        data = json.dumps(synthetic_trace()).encode()[:300]
        info = tarfile.TarInfo("ranks/worker0.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    with pytest.raises(InputError, match=r"ranks.tar.gz:ranks/worker0.json.*not valid JSON"):
        import_kineto_gpu(path, Options(batch_size=1))


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d["traceEvents"][1].pop("ts"), r"field 'traceEvents\[1\].ts'"),
    (lambda d: d["traceEvents"][3]["args"].update(correlation="x"),
     r"field 'traceEvents\[3\].args.correlation'"),
    (lambda d: d["traceEvents"][1]["args"].update({"Sequence number": "one"}),
     r"field 'traceEvents\[1\].args.Sequence number'"),
])
def test_missing_or_bad_field_is_named(tmp_path, capsys, edit, match):
    doc = copy.deepcopy(synthetic_trace())
    edit(doc)
    err = _cli_fails(tmp_path, _write(tmp_path, doc), capsys, "--params", _params(tmp_path),
                     "--batch-size", "8")
    assert re.search(match, err), err


def test_trace_without_backward_is_refused(tmp_path, capsys):
    doc = synthetic_trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ts"] < 200]  # forward only
    err = _cli_fails(tmp_path, _write(tmp_path, doc), capsys, "--batch-size", "8")
    assert "no backward" in err and "bad.json" in err


def test_trace_without_shapes_or_table_is_refused(tmp_path, capsys):
    err = _cli_fails(tmp_path, _write(tmp_path, synthetic_trace()), capsys, "--batch-size",
                     "8")
    assert "records no parameter shapes" in err and "field 'params'" in err


def test_manifest_entries_reimport_byte_identical(tmp_path, monkeypatch):
    """Every kineto-gpu entry of traces/manifest.yaml re-imports to the committed files."""
    from gradsched.traces.importers.manifest import load_manifest, run_entry, save_result

    monkeypatch.chdir(REPO)  # `params` paths are relative to the repository root
    entries = [e for e in load_manifest(REPO / "traces" / "manifest.yaml")
               if e.importer == "kineto-gpu"]
    assert len(entries) >= 4
    src = external(entries[0].file).parents[len(Path(entries[0].file).parts) - 1]
    for entry in entries:
        external(entry.file)
        written = save_result(entry, run_entry(entry, src), tmp_path)
        for path in written:
            for fresh in (path, path.with_name(path.stem + ".meta.json")):
                committed = REPO / "traces" / fresh.relative_to(tmp_path)
                assert fresh.read_bytes() == committed.read_bytes(), committed
