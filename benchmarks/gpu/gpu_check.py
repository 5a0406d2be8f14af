"""Everything the project measures on one GPU, in one run of at most about 5 minutes.

    PYTHONPATH=src .venv/bin/python benchmarks/gpu/gpu_check.py [--out DIR] [--budget-s 300]
        [--configs quick|all] [--threads 8]
    PYTHONPATH=src .venv/bin/python benchmarks/gpu/gpu_check.py busy ARCHIVE_OR_TRACE...

On one CUDA GPU (an H200 takes about 3.5 minutes with the default ``quick`` set) it runs,
each step in its own process with a time limit taken from what is left of the budget:

1. ``gradsched capture compute --device cuda`` for the zoo configurations (``quick``: 7 of
   the 18 that were measured on an H200, chosen to cover both regimes -- GPU-bound CNNs and
   fp32 BERT, host-bound deep CNNs, ViT and bf16 BERT; ``all``: the 18, which do not fit 5
   minutes: :func:`plan_configs` keeps those whose estimated cost fits and lists the rest as
   skipped before anything runs), with the settings of the committed H200 traces (warm-up 5,
   20 iterations, 8 threads, wall clock);
2. the hook-free ground truth of each of those configurations: 20 iterations timed by CUDA
   events around forward (with the loss), ``backward()`` and the optimizer step with no
   hooks and no profiler -- with the host's wall-clock span of issuing the forward and of
   ``backward()`` (``host_forward_ms``/``host_backward_ms``: ``time.perf_counter`` around
   the calls, which return once their kernels are queued, so the host's launch time without
   the profiler's per-op cost, unless the launch queue was full) -- then two
   ``torch.profiler`` iterations (CPU + CUDA, ``ProfilerStep#2`` and ``#3``) whose Chrome
   trace ``gradsched import kineto`` reads; the GPU's busy fraction is the importer's
   (``gradsched.traces.importers.kineto_gpu.step_busy``): the union of ``ProfilerStep#2``'s
   GPU activities over its GPU period, from its first activity to the first activity of
   ``#3``, a fraction in [0, 1];
3. the executor check: ``gradsched plan`` (DDP's, MG-WFBP's and DeAR's plans of ResNet-50
   from the committed CPU trace) and ``gradsched run --backend nccl --world-size 1`` with the
   executor and PyTorch DDP's default, i.e. the host-side cost of each way of running the same
   iteration (one rank: no communication).

It writes ONE archive, ``<out>/gpu-check-<host>-<UTC time>.tar.gz``, holding every output,
every step's log, ``machine.txt`` (``nvidia-smi``, ``nvidia-smi -q``, Python, torch, CUDA,
cuDNN, torchvision and transformers versions, the git commit) and ``manifest.json`` (per step:
the command, exit status, seconds, outputs; skipped steps and why). Compare it with the
committed H200 measurements (``traces/compute/h200/``, and ``data/h200/`` for the ground truth and
the executor runs; ``data/h200/gpu-check/`` is this script's own archive of 2026-11-27).

The budget arithmetic (:func:`plan_configs`): setup, the executor check and the archive
(``FIXED_S``) plus the capture and truth steps of each configuration (``STEP_ESTIMATE_S``,
measured on an H200), all times ``SAFETY``, must fit the budget; the default ``quick`` set
is planned at about 209 s, 261 s with the safety factor, of the default 300 s. While the
steps run, each capture and truth step is also cut where it would eat into the time reserved
for the executor check and the archive.

``busy`` prints the busy fraction of the truth traces of an archive (or of trace files) by
the same definition; it needs no GPU.

Exit status: 0 when every step ran and succeeded, 1 when a step failed, was cut by the
budget or was not planned for lack of budget (the archive is still written), 2 when there
is no usable CUDA GPU (nothing runs, nothing is written). Steps of the pipeline's own GPU
tier (``snakemake --profile profiles/slurm capture_gpu``, config/capture.yaml) cover the
multi-GPU sweeps; this script is the one-GPU check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NO_GPU_EXIT = 2

# (model, batch, seq_len or None, dtype) as in traces/compute/h200/ (names as captured there)
ALL_CONFIGS: list[tuple[str, int, int | None, str]] = [
    ("resnet50", 64, None, "fp32"), ("resnet50", 128, None, "fp32"),
    ("resnet50", 128, None, "bf16"), ("resnet101", 64, None, "fp32"),
    ("densenet121", 64, None, "fp32"), ("inception_v3", 64, None, "fp32"),
    ("googlenet", 128, None, "fp32"), ("vgg16", 64, None, "fp32"),
    ("alexnet", 256, None, "fp32"), ("mobilenet_v2", 128, None, "fp32"),
    ("vit_b_16", 64, None, "bf16"), ("bert-base", 32, 128, "fp32"),
    ("bert-base", 32, 128, "bf16"), ("bert-large", 16, 128, "bf16"),
    ("gpt2", 8, 1024, "fp32"), ("gpt2", 8, 1024, "bf16"),
    ("gpt2-medium", 8, 1024, "bf16"), ("gpt2-large", 4, 1024, "bf16"),
]
QUICK = {("resnet50", 64, "fp32"), ("resnet50", 128, "bf16"), ("resnet101", 64, "fp32"),
         ("densenet121", 64, "fp32"), ("vit_b_16", 64, "bf16"), ("bert-base", 32, "fp32"),
         ("bert-base", 32, "bf16")}
PROFILED_STEP = 2  # the truth's profiler schedule(wait=1, warmup=1, active=2): #2 and #3

# Seconds of each configuration's (capture, truth) steps. Measured by the gpu-check run on
# an H200 on 2026-11-27 (data/h200/gpu-check/, manifest.json 'seconds') where it ran them;
# else the capture's whole seconds on the H200 of 2026-11-26 (data/h200/capture-log.txt), the
# truth step taken as long as its capture (it runs fewer iterations; 0.75-0.98 of it in the
# 2026-11-27 run); else UNMEASURED_STEP_S, the longest capture measured.
UNMEASURED_STEP_S = 25.0
STEP_ESTIMATE_S: dict[str, tuple[float, float]] = {
    "resnet50-b64-cuda-fp32": (11.8, 9.19), "resnet50-b128-cuda-bf16": (12.45, 10.59),
    "resnet101-b64-cuda-fp32": (12.05, 10.35), "densenet121-b64-cuda-fp32": (13.51, 10.15),
    "vit_b_16-b64-cuda-bf16": (11.25, 9.64), "bert-base-s128-b32-cuda-fp32": (18.27, 14.06),
    "bert-base-s128-b32-cuda-bf16": (14.51, 14.16),
    "bert-large-s128-b16-cuda-bf16": (19.0, 15.52),  # its capture was cut on 2026-11-27
    "googlenet-b128-cuda-fp32": (11.0, 11.0), "resnet50-b128-cuda-fp32": (13.0, 13.0),
    "vgg16-b64-cuda-fp32": (13.0, 13.0), "gpt2-s1024-b8-cuda-bf16": (18.0, 18.0),
    "mobilenet_v2-b128-cuda-fp32": (13.0, 13.0), "inception_v3-b64-cuda-fp32": (15.0, 15.0),
    "alexnet-b256-cuda-fp32": (13.0, 13.0), "gpt2-medium-s1024-b8-cuda-bf16": (25.0, 25.0),
}
# Seconds outside the configurations (2026-11-27): setup before the first step (machine.txt:
# 6.6 s), the executor check (3 plans 1.5-1.7 s each, the run 21.8 s) and writing the archive
# (a 33 MB folder gzipped by tarfile: 1.5 s on a slow core).
SETUP_S, EXECUTOR_S, ARCHIVE_S = 7.0, 27.0, 3.0
FIXED_S = SETUP_S + EXECUTOR_S + ARCHIVE_S
DEFAULT_BUDGET_S = 300.0
SAFETY = 1.25  # the same step took up to ~25 % longer on the two H200 machines
EXECUTOR_TRACE = REPO / "traces/compute/cpu/resnet50-b16-cpu-fp32.csv"
EXECUTOR_COMM = "alpha-beta:alpha=20e-6,beta=20e-12"  # as the committed H200 executor runs


def stem(model: str, batch: int, seq: int | None, dtype: str) -> str:
    """The capture's file stem (``bert-base-s128-b32-cuda-bf16``)."""
    return f"{model}{f'-s{seq}' if seq else ''}-b{batch}-cuda-{dtype}"


def step_estimate_s(stem_name: str) -> float:
    """Estimated seconds of one configuration's capture and truth steps together."""
    capture, truth = STEP_ESTIMATE_S.get(stem_name, (UNMEASURED_STEP_S, UNMEASURED_STEP_S))
    return capture + truth


def plan_configs(stems: list[str], budget_s: float) -> dict[str, Any]:
    """Which configurations fit ``budget_s``: in order, each whose estimate fits what is
    left after ``FIXED_S`` and the ones already kept, all estimates times ``SAFETY``
    (``planned``); the others are ``not_planned``. The arithmetic goes into the manifest."""
    left = budget_s - SAFETY * FIXED_S
    planned, not_planned = [], []
    for name in stems:
        cost = SAFETY * step_estimate_s(name)
        if cost <= left:
            planned.append(name)
            left -= cost
        else:
            not_planned.append(name)
    estimate = FIXED_S + sum(step_estimate_s(n) for n in planned)
    return {"budget_s": budget_s, "safety": SAFETY, "fixed_s": FIXED_S,
            "estimate_s": round(estimate, 2), "with_safety_s": round(SAFETY * estimate, 2),
            "planned": planned, "not_planned": not_planned,
            "step_estimate_s": {n: round(step_estimate_s(n), 2) for n in stems}}


def gpu_problem() -> str | None:
    """Why this machine cannot run the check (None: one CUDA GPU is usable)."""
    try:
        import torch
    except ImportError as exc:
        return (f"torch is not installed ({exc}); install the CUDA build (README, "
                "'torch and the GPU')")
    if not torch.cuda.is_available():
        build = torch.version.cuda or "none (a CPU-only torch build)"
        return (f"no CUDA GPU is visible to torch {torch.__version__} (CUDA build: {build}; "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')})")
    return None


def _run(cmd: list[str], log: Path, timeout: float, env: dict[str, str]) -> tuple[int, float]:
    """Run ``cmd`` with its output in ``log``; (exit status, seconds); 124 on time-out."""
    start = time.monotonic()
    with log.open("w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=REPO, timeout=max(timeout, 1.0), check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            out.write(f"\n[gpu_check] killed after {timeout:.0f} s (budget)\n")
            rc = 124
    return rc, time.monotonic() - start


def machine_text() -> str:
    """nvidia-smi, versions and the commit, as one text."""
    parts = []
    for cmd in (["nvidia-smi"], ["nvidia-smi", "-q"], ["git", "-C", str(REPO), "rev-parse", "HEAD"],
                ["git", "-C", str(REPO), "status", "--short"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
            parts.append(f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            parts.append(f"$ {' '.join(cmd)}\n(not run: {exc})")
    import torch

    lines = [f"python {sys.version.split()[0]} ({platform.platform()})",
             f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
             f"cuDNN {torch.backends.cudnn.version()}",
             f"device 0: {torch.cuda.get_device_name(0)}", f"cpu cores: {os.cpu_count()}"]
    for name in ("torchvision", "transformers", "numpy"):
        try:
            lines.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            lines.append(f"{name}: not installed")
    return "\n".join(lines) + "\n\n" + "\n".join(parts)


def trace_busy(path: Path) -> Any:
    """The importer's busy fraction of a truth trace's ``ProfilerStep#2``
    (``gradsched.traces.importers.kineto_gpu.StepBusy``)."""
    from gradsched.traces.importers.kineto_gpu import trace_busy as importer_busy

    return importer_busy(path, step=PROFILED_STEP)


def archive_busy(archive: Path) -> dict[str, Any]:
    """``{stem: StepBusy}`` of every ``truth/*.pt.trace.json`` in a gpu-check archive."""
    from gradsched.traces.importers.kineto.events import decode_trace_bytes
    from gradsched.traces.importers.kineto_gpu import step_busy

    out = {}
    with tarfile.open(archive) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            folder, _, name = member.name.rpartition("/")
            if folder.endswith("/truth") and name.endswith(".pt.trace.json"):
                label = f"{archive}:{member.name}"
                raw = tar.extractfile(member).read()
                out[name.removesuffix(".pt.trace.json")] = step_busy(
                    decode_trace_bytes(raw, label), label, step=PROFILED_STEP)
    return out


def busy_table(paths: list[Path]) -> str:
    """One line per truth trace: busy ms, GPU period ms, the fraction, how the period ends."""
    lines = ["trace  busy_ms  gpu_period_ms  busy_fraction  period_end"]
    for path in paths:
        found = (archive_busy(path) if path.name.endswith((".tar.gz", ".tar"))
                 else {path.name.removesuffix(".gz").removesuffix(".json"): trace_busy(path)})
        lines += [f"{stem}  {b.busy_s * 1e3:.2f}  {b.period_s * 1e3:.2f}  {b.share:.3f}  "
                  f"{b.period_end}" for stem, b in found.items()]
    return "\n".join(lines)


def truth(args: argparse.Namespace) -> int:
    """Hook-free iterations of one configuration: CUDA-event medians and one profiled step."""
    import torch

    from gradsched.workloads.zoo import build_model

    torch.set_num_threads(args.threads)
    spec = build_model(args.model, args.batch_size, device="cuda", dtype=args.dtype,
                       seq_len=args.seq_len, seed=0)
    opt = torch.optim.SGD(spec.model.parameters(), lr=1e-3, momentum=0.9)
    batch = spec.make_batch()

    def step(events: list[Any] | None = None, host: list[float] | None = None) -> None:
        mark = (lambda i: events[i].record()) if events else (lambda i: None)
        clock = host.append if host is not None else (lambda t: None)
        mark(0)
        opt.zero_grad(set_to_none=True)
        clock(time.perf_counter())
        loss = spec.loss(spec.model, batch)
        clock(time.perf_counter())
        mark(1)
        loss.backward()
        clock(time.perf_counter())
        mark(2)
        opt.step()
        mark(3)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {"forward_ms": [], "backward_ms": [], "update_ms": [],
                                     "iteration_ms": [], "host_forward_ms": [],
                                     "host_backward_ms": []}
    for _ in range(args.iters):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        host: list[float] = []
        step(events, host)
        torch.cuda.synchronize()
        times["host_forward_ms"].append((host[1] - host[0]) * 1e3)
        times["host_backward_ms"].append((host[2] - host[1]) * 1e3)
        times["forward_ms"].append(events[0].elapsed_time(events[1]))
        times["backward_ms"].append(events[1].elapsed_time(events[2]))
        times["update_ms"].append(events[2].elapsed_time(events[3]))
        times["iteration_ms"].append(events[0].elapsed_time(events[3]))
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2)) as prof:
        for _ in range(4):
            step()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(str(args.trace))
    med = {k: float(sorted(v)[len(v) // 2]) for k, v in times.items()}
    summary = {"model": args.model, "batch_size": args.batch_size, "seq_len": args.seq_len,
               "dtype": args.dtype, "threads": args.threads, "warmup": args.warmup,
               "iters": args.iters, "median": med, "samples": times, **busy_fields(args.trace)}
    Path(args.summary).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def busy_fields(trace: Path) -> dict[str, Any]:
    """The truth summary's busy fields; an unreadable trace is said, not raised (the
    CUDA-event timings stand without it)."""
    from gradsched.errors import GradschedError

    try:
        busy = trace_busy(Path(trace))
    except GradschedError as exc:
        return {"busy_fraction": None, "busy_error": str(exc)}
    return {"busy_step": f"ProfilerStep#{busy.step}", "gpu_busy_ms": busy.busy_s * 1e3,
            "gpu_period_ms": busy.period_s * 1e3, "busy_fraction": busy.share,
            "busy_period_end": busy.period_end,
            "note": "busy_fraction: gradsched import kineto's gpu_busy_share of busy_step: "
                    "the union of the GPU activities the step launched (gpu_busy_ms) over "
                    "its GPU period (gpu_period_ms, from its first activity to "
                    "busy_period_end), a fraction in [0, 1]"}


def _seconds(text: str) -> float:
    """argparse type: a finite number of seconds above 0 and at most 1e6 (``nan``, ``inf``,
    ``0`` and ``-5`` refused: a NaN budget would pass every ``<`` test and plan nothing)."""
    try:
        value = float(text.strip()) if text.strip().lower() not in ("nan", "inf", "-inf",
                                                                    "infinity") else None
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not 0 < value <= 1e6:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, 1e6]")
    return value


def _count(low: int, high: int) -> Any:
    """argparse type factory: ASCII digits, an integer in ``[low, high]``."""
    def parse(text: str) -> int:
        stripped = text.strip()
        if not (stripped.isascii() and stripped.isdigit()) or not low <= int(stripped) <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer in {low}..{high}")
        return int(stripped)
    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    t = sub.add_parser("truth", help="(internal) hook-free iterations of one configuration")
    t.add_argument("--model", required=True)
    t.add_argument("--batch-size", type=_count(1, 1 << 20), required=True)
    t.add_argument("--seq-len", type=_count(1, 1 << 20))
    t.add_argument("--dtype", default="fp32")
    t.add_argument("--threads", type=_count(1, 1024), default=8)
    t.add_argument("--warmup", type=_count(0, 10_000), default=5)
    t.add_argument("--iters", type=_count(1, 10_000), default=20)
    t.add_argument("--trace", type=Path, required=True)
    t.add_argument("--summary", type=Path, required=True)
    b = sub.add_parser("busy", help="busy fraction of the truth traces of gpu-check archives "
                       "(or of trace files); needs no GPU")
    b.add_argument("paths", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=REPO / "results/gpu-check",
                        help="folder of the archive (default results/gpu-check)")
    parser.add_argument("--budget-s", type=_seconds, default=DEFAULT_BUDGET_S,
                        help=f"wall-clock budget of all steps (default {DEFAULT_BUDGET_S:.0f})")
    parser.add_argument("--configs", choices=("quick", "all"), default="quick")
    parser.add_argument("--threads", type=_count(1, 1024), default=8)
    args = parser.parse_args(argv)

    if args.cmd == "busy":
        return print_busy(args.paths)
    problem = gpu_problem()
    if problem is not None:
        print(f"gpu_check: cannot run: {problem}. This script needs one CUDA GPU; "
              "nothing was run or written.", file=sys.stderr)
        return NO_GPU_EXIT
    if args.cmd == "truth":
        return truth(args)
    return check(args)


def print_busy(paths: list[Path]) -> int:
    """``busy``: the table on stdout; a missing or unreadable file is a one-line error."""
    from gradsched.errors import GradschedError

    try:
        print(busy_table(paths))
    except (GradschedError, OSError, EOFError, tarfile.TarError) as exc:
        print(f"gpu_check busy: error: {exc}", file=sys.stderr)
        return 2
    return 0


def config_steps(config: tuple[str, int, int | None, str], root: Path, threads: int
                 ) -> list[tuple[str, list[str], list[Path]]]:
    """(kind, command, outputs) of one configuration's capture and truth steps."""
    model, batch, seq, dtype = config
    name = stem(*config)
    shape = ["--batch-size", str(batch), *(["--seq-len", str(seq)] if seq else []),
             "--dtype", dtype, "--threads", str(threads)]
    csv = root / "compute" / f"{name}.csv"
    capture = [sys.executable, "-m", "gradsched", "capture", "compute", "--model", model,
               *shape, "--device", "cuda", "--warmup", "5", "--iters", "20", "--clock", "wall",
               "-o", str(csv)]
    trace, summary = root / "truth" / f"{name}.pt.trace.json", root / "truth" / f"{name}.json"
    truth_cmd = [sys.executable, str(Path(__file__).resolve()), "truth", "--model", model,
                 *shape, "--trace", str(trace), "--summary", str(summary)]
    return [("capture", capture, [csv, csv.with_suffix(".meta.json")]),
            ("truth", truth_cmd, [trace, summary])]


def check(args: argparse.Namespace) -> int:
    """The three steps within the budget, then the archive."""
    start = time.monotonic()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"gpu-check-{socket.gethostname().split('.')[0]}-{stamp}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "src"), env.get("PYTHONPATH", "")) if p)
    gs = [sys.executable, "-m", "gradsched"]
    configs = [c for c in ALL_CONFIGS
               if args.configs == "all" or (c[0], c[1], c[3]) in QUICK]
    budget_plan = plan_configs([stem(*c) for c in configs], args.budget_s)
    steps: list[dict[str, Any]] = []

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        root = Path(tmp) / name
        for folder in ("compute", "truth", "executor", "logs"):
            (root / folder).mkdir(parents=True)
        (root / "machine.txt").write_text(machine_text())

        def step(kind: str, label: str, cmd: list[str], outputs: list[Path],
                 reserve_s: float = 0.0) -> int:
            left = args.budget_s - (time.monotonic() - start) - reserve_s
            record: dict[str, Any] = {"step": kind, "name": label,
                                      "command": " ".join(cmd).replace(str(root) + "/", "")}
            if left < 5.0:
                record.update(status="skipped", reason="budget spent", rc=None, seconds=0.0)
                steps.append(record)
                print(f"gpu_check: {kind} {label}: skipped (budget spent)", flush=True)
                return 124
            rc, secs = _run(cmd, root / "logs" / f"{kind}-{label}.log", left, env)
            record.update(status="ok" if rc == 0 else ("timeout" if rc == 124 else "failed"),
                          rc=rc, seconds=round(secs, 2), time_limit_s=round(left, 1),
                          outputs=[str(p.relative_to(root)) for p in outputs if p.exists()])
            steps.append(record)
            print(f"gpu_check: {kind} {label}: {record['status']} in {secs:.1f} s", flush=True)
            return rc

        # captures and truths may not eat into the executor check's and the archive's time
        reserve_s = SAFETY * (EXECUTOR_S + ARCHIVE_S)
        for config in configs:
            label = stem(*config)
            if label not in budget_plan["planned"]:
                for kind in ("capture", "truth"):
                    steps.append({"step": kind, "name": label, "status": "skipped", "rc": None,
                                  "seconds": 0.0, "reason": "not planned: the estimate does "
                                  "not fit the budget (manifest 'plan')"})
                print(f"gpu_check: {label}: not planned (budget)", flush=True)
                continue
            for kind, cmd, outputs in config_steps(config, root, args.threads):
                step(kind, label, cmd, outputs, reserve_s=reserve_s)

        plans = []
        for alg in ("ddp", "mgwfbp", "dear"):
            plan = root / "executor" / f"resnet50-{alg}.plan.json"
            rc = step("plan", alg, [*gs, "plan", "--compute", str(EXECUTOR_TRACE), "--comm",
                                    EXECUTOR_COMM, "--world-size", "8", "--algorithm", alg,
                                    "-o", str(plan)], [plan])
            if rc == 0:
                plans.append(plan)
        out = root / "executor" / "resnet50-b64-nccl-1.csv"
        step("run", "executor-vs-ddp",
             [*gs, "run", *[a for p in plans for a in ("--plan", str(p))], "--baseline", "ddp",
              "--bucket-cap-mb", "default", "--model", "resnet50", "--batch-size", "64",
              "--world-size", "1", "--backend", "nccl", "--iters", "20", "--warmup", "5",
              "--threads", str(args.threads), "-o", str(out)],
             [out, out.with_suffix(".summary.csv")])

        failed = [s for s in steps if s["status"] != "ok"]
        manifest = {
            "name": name, "created_utc": stamp, "budget_s": args.budget_s,
            "seconds": round(time.monotonic() - start, 1), "configs": args.configs,
            "threads": args.threads, "command": " ".join(sys.argv),
            "plan": budget_plan, "steps": steps, "n_steps": len(steps), "n_not_ok": len(failed),
            "compare_with": {"compute": "traces/compute/h200/ (H200, 2026-11-26)",
                             "gpu_check": "data/h200/gpu-check/ (another H200, 2026-11-27)",
                             "readme": "data/h200/README.md (the H200 run, 2026-11-26)"},
        }
        (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        args.out.mkdir(parents=True, exist_ok=True)
        archive = args.out / f"{name}.tar.gz"
        partial = archive.with_name(archive.name + ".part")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(root, arcname=name)
        os.replace(partial, archive)
        shutil.rmtree(root, ignore_errors=True)
    print(f"gpu_check: {len(steps) - len(failed)}/{len(steps)} steps ok in "
          f"{manifest['seconds']:.0f} s -> {archive}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
