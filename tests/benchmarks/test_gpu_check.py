"""benchmarks/gpu/gpu_check.py: without a GPU it stops at once with a clear message and exit 2,
and writes nothing; its busy fraction is the importer's and a fraction on the committed H200
archive (data/h200/gpu-check/); the default quick set fits the default budget with margin."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu" / "gpu_check.py"
ARCHIVE = REPO / "data" / "h200" / "gpu-check" / "gpu-check-h200-20261127T144221Z.tar.gz"
# The importer's busy fraction of ProfilerStep#2 of each truth trace of that archive (the
# script itself reported 1.02-1.55 for five of them with its former whole-trace kernel union
# over the unprofiled iteration).
COMMITTED_BUSY = {
    "bert-base-s128-b32-cuda-bf16": 0.234, "bert-base-s128-b32-cuda-fp32": 0.981,
    "bert-large-s128-b16-cuda-bf16": 0.273, "densenet121-b64-cuda-fp32": 0.564,
    "resnet101-b64-cuda-fp32": 0.695, "resnet50-b128-cuda-bf16": 0.975,
    "resnet50-b64-cuda-fp32": 0.934, "vit_b_16-b64-cuda-bf16": 0.662,
}


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_exits_2_with_a_message_and_writes_nothing(tmp_path: Path) -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--budget-s", "10"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "gpu_check: cannot run:" in proc.stderr
    assert "needs one CUDA GPU" in proc.stderr and "nothing was run or written" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def _env() -> dict[str, str]:
    return dict(os.environ, CUDA_VISIBLE_DEVICES="",
                PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))


def test_busy_fraction_is_a_fraction_on_the_committed_h200_archive() -> None:
    busy = _module().archive_busy(ARCHIVE)
    assert sorted(busy) == sorted(COMMITTED_BUSY)
    for stem, step in busy.items():
        assert 0.0 < step.share <= 1.0, stem
        assert step.step == 2 and step.busy_s <= step.period_s
        assert round(step.share, 3) == COMMITTED_BUSY[stem], stem


def test_busy_fraction_is_the_importers_gpu_busy_share(tmp_path: Path) -> None:
    """One definition: the script's number is the importer's sidecar ``gpu_busy_share``."""
    from gradsched.traces.importers.kineto_gpu import Options, import_kineto_gpu

    stem = "resnet101-b64-cuda-fp32"
    with tarfile.open(ARCHIVE) as tar:
        member = next(m for m in tar.getmembers()
                      if m.name.endswith(f"truth/{stem}.pt.trace.json"))
        trace = tmp_path / f"{stem}.pt.trace.json"
        trace.write_bytes(tar.extractfile(member).read())
    meta = import_kineto_gpu(trace, Options(batch_size=64, step=2)).compute.meta
    mine = _module().trace_busy(trace)
    assert round(mine.share, 9) == meta["gpu_busy_share"]  # the sidecar keeps 9 digits
    assert abs(mine.busy_s - meta["gpu_busy_s"]) < 1e-9
    fields = _module().busy_fields(trace)  # what the truth step writes into its summary
    assert fields["busy_fraction"] == mine.share and fields["busy_step"] == "ProfilerStep#2"
    bad = tmp_path / "empty.pt.trace.json"
    bad.write_text("")
    fields = _module().busy_fields(bad)
    assert fields["busy_fraction"] is None and "empty file" in fields["busy_error"]


def test_busy_command_needs_no_gpu_and_errors_are_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "busy", str(ARCHIVE)],
                          capture_output=True, text=True, env=_env(), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["trace", "busy_ms", "gpu_period_ms", "busy_fraction",
                                "period_end"]
    assert len(lines) == 1 + len(COMMITTED_BUSY)
    missing = tmp_path / "missing.tar.gz"
    proc = subprocess.run([sys.executable, str(SCRIPT), "busy", str(missing)],
                          capture_output=True, text=True, env=_env(), timeout=300, check=False)
    assert proc.returncode == 2 and "missing.tar.gz" in proc.stderr
    assert "Traceback" not in proc.stderr


def _archive_manifest() -> dict:
    with tarfile.open(ARCHIVE) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/manifest.json"))
        return json.loads(tar.extractfile(member).read())


def test_step_estimates_are_the_measured_seconds() -> None:
    """The estimates of the configurations the H200 run timed are its seconds; the fixed
    part covers its executor check."""
    module = _module()
    manifest = _archive_manifest()
    timed = {}
    for record in manifest["steps"]:
        if record["step"] in ("capture", "truth") and record["status"] == "ok":
            timed.setdefault(record["name"], {})[record["step"]] = record["seconds"]
    for stem, seconds in timed.items():
        capture, truth = module.STEP_ESTIMATE_S[stem]
        assert truth == seconds["truth"]
        assert capture == seconds.get("capture", capture)
    executor = sum(r["seconds"] for r in manifest["steps"] if r["step"] in ("plan", "run"))
    assert executor <= module.EXECUTOR_S
    assert set(module.STEP_ESTIMATE_S) <= {module.stem(*c) for c in module.ALL_CONFIGS}


def test_quick_set_fits_the_default_budget_with_margin() -> None:
    """The run of 2026-11-27 cut its last capture (budget 280 s); the quick set now costs
    at most 1/SAFETY of the default budget by the measured estimates."""
    module = _module()
    budget = module.DEFAULT_BUDGET_S
    quick = [module.stem(*c) for c in module.ALL_CONFIGS if (c[0], c[1], c[3]) in module.QUICK]
    plan = module.plan_configs(quick, budget)
    assert plan["planned"] == quick and plan["not_planned"] == []
    assert plan["with_safety_s"] <= budget
    assert plan["estimate_s"] == round(module.FIXED_S + sum(
        module.step_estimate_s(s) for s in quick), 2)
    assert plan["estimate_s"] <= 0.75 * budget  # a quarter of the budget to spare
    assert module.plan_configs(quick, 280.0)["not_planned"] == []  # the 2026-11-27 budget


def test_plan_keeps_what_fits_in_order_and_lists_the_rest() -> None:
    module = _module()
    stems = [module.stem(*c) for c in module.ALL_CONFIGS]
    plan = module.plan_configs(stems, 300.0)
    assert plan["planned"] + plan["not_planned"] != [] and plan["not_planned"]
    assert sorted(plan["planned"] + plan["not_planned"]) == sorted(stems)
    assert plan["with_safety_s"] <= 300.0
    # first fit: nothing left out would still have fitted
    spare = 300.0 - plan["with_safety_s"]
    assert all(module.SAFETY * module.step_estimate_s(s) > spare for s in plan["not_planned"])
    assert module.plan_configs(stems, 10.0)["planned"] == []
    assert module.step_estimate_s("unknown-b1-cuda-fp32") == 2 * module.UNMEASURED_STEP_S


def test_stems_are_the_committed_h200_trace_names() -> None:
    module = _module()
    stems = {module.stem(m, b, s, d) for m, b, s, d in module.ALL_CONFIGS}
    committed = {p.stem for p in (REPO / "traces/compute/h200").glob("*-cuda-*.csv")
                 if not p.stem.endswith("-corrected")}
    assert stems == committed and len(stems) == 18
    assert {(m, b, d) for m, b, _, d in module.ALL_CONFIGS} >= module.QUICK


def test_one_archive_with_manifest_and_budget_cuts(tmp_path: Path, monkeypatch) -> None:
    """The orchestration without a GPU: every step faked (rc 0, no time), then one archive
    whose manifest lists every step; a budget too small for the rest marks it skipped."""
    module = _module()
    monkeypatch.setattr(module, "gpu_problem", lambda: None)
    monkeypatch.setattr(module, "machine_text", lambda: "nvidia-smi: (faked in the test)\n")
    calls: list[list[str]] = []

    def fake_run(cmd, log, timeout, env):
        calls.append(cmd)
        log.write_text("faked\n")
        return 0, 0.0

    monkeypatch.setattr(module, "_run", fake_run)
    assert module.main(["--out", str(tmp_path), "--budget-s", "300"]) == 0
    archives = list(tmp_path.glob("gpu-check-*.tar.gz"))
    assert len(archives) == 1 and not list(tmp_path.glob("*.part"))
    with tarfile.open(archives[0]) as tar:
        names = tar.getnames()
        root = names[0].split("/")[0]
        manifest = json.loads(tar.extractfile(f"{root}/manifest.json").read())
        assert f"{root}/machine.txt" in names
    kinds = [s["step"] for s in manifest["steps"]]
    assert kinds.count("capture") == kinds.count("truth") == len(module.QUICK)
    assert kinds[-4:] == ["plan", "plan", "plan", "run"] and manifest["n_not_ok"] == 0
    run = calls[-1]
    assert run[run.index("--backend") + 1] == "nccl" and run.count("--plan") == 3
    # a budget that leaves nothing after the reserve: captures are skipped, exit status 1
    calls.clear()
    assert module.main(["--out", str(tmp_path / "small"), "--budget-s", "60"]) == 1
    with tarfile.open(next((tmp_path / "small").glob("*.tar.gz"))) as tar:
        root = tar.getnames()[0].split("/")[0]
        small = json.loads(tar.extractfile(f"{root}/manifest.json").read())
    assert {s["status"] for s in small["steps"] if s["step"] == "capture"} == {"skipped"}
    assert small["plan"]["planned"] == [] and len(small["plan"]["not_planned"]) == len(
        module.QUICK)
    assert [c for c in calls if "capture" in c or "truth" in c] == []
    assert manifest["plan"]["not_planned"] == [] and manifest["plan"]["budget_s"] == 300
