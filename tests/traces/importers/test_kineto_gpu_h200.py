"""The Kineto GPU importer on our own H200 hook-free profiler traces (data/h200): all 18
``ProfilerStep`` traces of ``kineto-steps/`` and the five ``gs:iterationN`` traces of
``kineto/`` import, busy shares are fractions, >= 95 % of each pass's kernel time is on a
layer, and the gradients match the hook capture of the same model (traces/compute/h200)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.traces import ComputeTrace
from gradsched.traces.importers.kineto_gpu import Options, import_kineto_gpu

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "data" / "h200"
STEPS = sorted((H200 / "kineto-steps").glob("*.pt.trace.json.gz"))
RANGES = sorted((H200 / "kineto").glob("*.pt.trace.json.gz"))


def _import(path: Path, step_range: str | None) -> tuple[ComputeTrace, ComputeTrace]:
    stem = path.name.removesuffix(".pt.trace.json.gz")
    hook = ComputeTrace.load(REPO / "traces" / "compute" / "h200" / f"{stem}.csv")
    opts = Options(model=hook.meta["model"], step_range=step_range, world_size=1,
                   batch_size=int(hook.meta["batch_size"]))
    return import_kineto_gpu(path, opts).compute, hook


def test_all_ground_truth_traces_are_shipped() -> None:
    assert len(STEPS) == 18 and len(RANGES) == 5


@pytest.mark.parametrize("path, step_range", [(p, None) for p in STEPS]
                         + [(p, "gs:iteration") for p in RANGES], ids=lambda v: getattr(
                             v, "name", str(v)).removesuffix(".pt.trace.json.gz"))
def test_h200_trace_imports(path: Path, step_range: str | None) -> None:
    trace, hook = _import(path, step_range)
    meta = trace.meta
    assert 0.0 <= meta["gpu_busy_share"] <= 1.0
    assert meta["forward_attributed_share"] >= 0.95
    assert meta["backward_attributed_share"] >= 0.95
    assert (meta["forward_method"].startswith("nn.Module")) == (step_range is not None)
    mine = trace.frame.sort_values("ready_order")["numel"].tolist()
    theirs = hook.frame.sort_values("ready_order")["numel"].tolist()
    assert mine == theirs  # same gradients in the same ready order as the hook capture


def test_named_range_is_needed_for_gs_iteration_traces(capsys, tmp_path) -> None:
    with pytest.raises(InputError, match=r"no ProfilerStep#N spans.*--step-range"):
        import_kineto_gpu(RANGES[0], Options(batch_size=16))
    with pytest.raises(InputError, match="no gs:iteration9 "):
        import_kineto_gpu(RANGES[0], Options(batch_size=16, step_range="gs:iteration",
                                             step=9))


def test_trace_without_gpu_activity_is_refused(capsys, tmp_path) -> None:
    """A CPU-only profile of a GPU run (no kernels): a clear error naming the step."""
    with gzip.open(H200 / "kineto-steps" / "alexnet-b256-cuda-fp32.pt.trace.json.gz") as fh:
        doc = json.loads(fh.read())
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    bad = tmp_path / "cpu-only.json"
    bad.write_text(json.dumps(doc))
    rc = main(["import", "kineto", str(bad), "--compute-out", str(tmp_path / "o.csv"),
               "--batch-size", "256"])
    err = capsys.readouterr().err
    assert rc == 2 and "launched no GPU kernel" in err and "cpu-only.json" in err
    assert not (tmp_path / "o.csv").exists()
