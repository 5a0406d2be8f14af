"""``gradsched reexec``: re-execute every planner's plan for real and compare with the replay.

Sub-commands:

* ``run`` -- plan, then measure every case of ``config/reexec.yaml`` (or the ``--case``
  given): each distinct plan through the executor, PyTorch DDP itself and a compute-only
  control, in interleaved rounds. Writes ``OUT/<case>/{iterations.csv, meta.json, plans/}``.
* ``collect`` -- predictions (replay, with and without interference) next to the
  measurements of measured case folders -> one CSV (``measured.csv``).
* ``interference`` -- calibrate the compute / communication slowdown factors on this
  machine (gloo on CPU, or ``--backend nccl`` on a GPU node) -> a small JSON
  (:mod:`gradsched.capture.interference`).
* ``analyze`` -- errors, median |error|, worst, Kendall tau (with and without
  interference), best plan vs DDP; a table (CSV, Markdown, LaTeX) and a figure.
* ``accum`` -- gradient accumulation and ZeRO-1 (``config/reexec-accum.yaml``): per case
  and family (stock DDP, best, ZeRO-1 with and without overlap) predicted vs measured with
  bootstrap intervals, median |error| per family and k; tables and macros
  (:mod:`gradsched.reexec.accum`).

See ``gradsched.reexec`` for the method.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from gradsched.admission import check_memory, check_ranks
from gradsched.capture.interference import Calibration, calibrate
from gradsched.commands._admit import Training, admit_training
from gradsched.commands._args import (
    add_oversubscribe,
    count,
    non_negative_count,
    size,
    threads,
    world_size,
)
from gradsched.commands._outputs import output_file, output_folder
from gradsched.distributed.placement import Launch
from gradsched.errors import ConfigError
from gradsched.io import write_csv_atomic
from gradsched.reexec.accum import analyze_accum
from gradsched.reexec.analysis import analyze
from gradsched.reexec.config import load_config, parse_interference_args, select_cases
from gradsched.reexec.predict import collect
from gradsched.reexec.run import case_plans_for, executor_buffer_bytes, run_case
from gradsched.report.reexec import AnalysisOutputs, write_analysis
from gradsched.report.reexec_accum import write_accum
from gradsched.staging import Staging, check_writable

INTERFERENCE_BUFFERS = 3
"""``--comm-bytes``-sized buffers one rank of ``reexec interference`` holds (the
all-reduce's tensor and the copies its rounds keep)."""


def register(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("reexec", help="re-execute plans for real and compare with the replay",
                         description=__doc__.split("\n\n")[0])
    rsub = top.add_subparsers(dest="reexec_command", metavar="STEP", required=True)
    _add_run(rsub)
    _add_collect(rsub)
    _add_interference(rsub)
    _add_analyze(rsub)
    _add_accum(rsub)


def _add_run(rsub: argparse._SubParsersAction) -> None:
    """``reexec run``: plan and measure the configured cases."""
    run = rsub.add_parser("run", help="plan and measure the configured cases")
    run.add_argument("--config", type=Path, default=Path("config/reexec.yaml"))
    run.add_argument("--case", action="append", default=[],
                     help="case name (repeatable; default: every configured case)")
    run.add_argument("--iters", type=count, default=None, help="override settings.iters")
    run.add_argument("--warmup", type=non_negative_count, default=None,
                     help="override settings.warmup")
    run.add_argument("--rounds", type=count, default=None, help="override settings.rounds")
    run.add_argument("--interference", action="append", default=[],
                     metavar="[NETWORK=]JSON",
                     help="calibrated interference JSON that the best planner scores with, "
                          "for every case or, as NETWORK=JSON, for that network "
                          "(repeatable; default: none)")
    run.add_argument("--allow-load", action="store_true",
                     help="measure even when other work keeps the machine busy (by default "
                          "a case is refused when >= 0.25 cores are busy before it starts; "
                          "every item's foreign CPU use is recorded and flagged either way)")
    run.add_argument("--list", action="store_true", help="list the cases and exit")
    add_oversubscribe(run)
    run.add_argument("-o", "--output", type=output_folder, default=Path("results/reexec"),
                     help="folder of the case folders")
    run.set_defaults(func=_run)


def _add_collect(rsub: argparse._SubParsersAction) -> None:
    """``reexec collect``: predictions next to the measurements."""
    col = rsub.add_parser("collect", help="predictions next to the measurements -> one CSV")
    col.add_argument("folders", nargs="+", type=Path, help="measured case folders")
    col.add_argument("--interference", action="append", default=[],
                     metavar="[NETWORK=]JSON",
                     help="interference JSON (collective_cpu_s, compute_slowdown, "
                          "comm_slowdown), for every "
                          "case or, as NETWORK=JSON, for the cases on that network "
                          "(repeatable)")
    col.add_argument("--iterations-csv", type=output_file, default=None,
                     help="also write every timed iteration of every case here")
    col.add_argument("--provenance", type=output_file, default=None,
                     help="also write the settings and provenance JSON here")
    col.add_argument("-o", "--output", type=output_file, required=True, help="measured.csv")
    col.set_defaults(func=_collect)


def _add_interference(rsub: argparse._SubParsersAction) -> None:
    """``reexec interference``: calibrate the interference factors."""
    inter = rsub.add_parser(
        "interference", help="calibrate compute/communication interference",
        description="Measure, on 2 ranks, a compute kernel loop alone and while large and "
                    "small all-reduces are in flight, and an all-reduce alone and while the "
                    "compute loop runs: the compute time one collective costs "
                    "(collective_cpu_s), and the slowdowns compute_slowdown and "
                    "comm_slowdown.")
    inter.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    inter.add_argument("--world-size", type=world_size, default=2)
    inter.add_argument("--threads", type=threads, default=1,
                       help="intra-op threads per rank")
    inter.add_argument("--cluster", default=None, metavar="RATE",
                       help="run in the emulated cluster shaped to RATE (root)")
    inter.add_argument("--comm-bytes", type=size(4), default=8 << 20,
                       help="all-reduce size (default 8M; K/M/G suffixes)")
    inter.add_argument("--small-bytes", type=size(4), default=4 << 10,
                       help="size of the small all-reduces that measure the compute cost "
                       "of one collective (default 4K)")
    inter.add_argument("--kernel", choices=["conv", "matmul"], default="conv",
                       help="compute kernel (conv: a ResNet-like 3x3 convolution fwd+bwd)")
    inter.add_argument("--rounds", type=count, default=5, help="alternating measurement rounds")
    inter.add_argument("--reps", type=count, default=20, help="kernel repetitions per phase")
    add_oversubscribe(inter)
    inter.add_argument("-o", "--output", type=output_file, required=True, help="interference.json")
    inter.set_defaults(func=_interference)


def _add_analyze(rsub: argparse._SubParsersAction) -> None:
    """``reexec analyze``: errors, Kendall tau, tables and figure."""
    ana = rsub.add_parser("analyze", help="errors, Kendall tau, table and figure")
    ana.add_argument("--input", type=Path, required=True, help="measured.csv (from collect)")
    ana.add_argument("--iterations-csv", type=Path, default=None,
                     help="iterations.csv (from collect): adds 95 %% bootstrap intervals "
                          "(plan times, errors, Kendall tau, best vs DDP)")
    ana.add_argument("--stats", type=output_file, default=None, help="per-case statistics CSV")
    ana.add_argument("--errors", type=output_file, default=None, help="per-plan errors CSV")
    ana.add_argument("--summary-table", type=output_file, default=None,
                     help="LaTeX table of the per-case summary (needs --iterations-csv)")
    ana.add_argument("--summary-md", type=output_file, default=None,
                     help="Markdown table of the per-case summary (needs --iterations-csv)")
    ana.add_argument("--stock-ddp-tex", type=output_file, default=None,
                     help="LaTeX table: stock PyTorch DDP with a planner's buckets "
                          "(ddp-list items) vs DDP default, the tuned cap and best; best "
                          "split into implementation and schedule (needs --iterations-csv)")
    ana.add_argument("--stock-ddp-md", type=output_file, default=None,
                     help="the same table in Markdown (needs --iterations-csv)")
    ana.add_argument("--table", type=output_file, default=None, help="LaTeX table")
    ana.add_argument("--md", type=output_file, default=None, help="Markdown table")
    ana.add_argument("--figure", type=output_file, default=None, help="figure (PDF)")
    ana.add_argument("--png", type=output_file, default=None, help="figure (PNG)")
    ana.set_defaults(func=_analyze)


def _add_accum(rsub: argparse._SubParsersAction) -> None:
    acc = rsub.add_parser("accum", help="gradient accumulation and ZeRO-1: predicted vs "
                          "measured per family and k, with bootstrap intervals")
    acc.add_argument("--input", type=Path, required=True, help="measured.csv (from collect)")
    acc.add_argument("--iterations-csv", type=Path, required=True,
                     help="iterations.csv (from collect): the bootstrap's iterations")
    acc.add_argument("--rows", type=output_file, default=None,
                     help="CSV: one row per case and family")
    acc.add_argument("--summary", type=output_file, default=None,
                     help="CSV: median |error| per family and k")
    acc.add_argument("--tex", type=output_file, default=None, help="LaTeX table (per case)")
    acc.add_argument("--md", type=output_file, default=None, help="its Markdown twin")
    acc.add_argument("--summary-tex", type=output_file, default=None,
                     help="LaTeX table (per family and k)")
    acc.add_argument("--summary-md", type=output_file, default=None, help="its Markdown twin")
    acc.add_argument("--macros", type=output_file, default=None,
                     help="\\newcommand file of the numbers the prose quotes")
    acc.set_defaults(func=_accum)


def _accum(args: argparse.Namespace) -> int:
    for tex, md in (("tex", "md"), ("summary_tex", "summary_md")):
        if (getattr(args, tex) is None) != (getattr(args, md) is None):
            raise ConfigError(f"--{tex.replace('_', '-')} and --{md.replace('_', '-')} go "
                              "together (a table and its Markdown twin)")
    rows, summary = analyze_accum(args.input, args.iterations_csv)
    names = ("rows", "summary", "tex", "md", "summary_tex", "summary_md", "macros")
    with Staging() as stage:  # every requested output, or none
        out = {name: stage.file(getattr(args, name)) if getattr(args, name) else None
               for name in names}
        if out["rows"] is not None:
            write_csv_atomic(out["rows"], rows)
        if out["summary"] is not None:
            write_csv_atomic(out["summary"], summary)
        write_accum(rows, summary, tex=out["tex"], md=out["md"],
                    summary_tex=out["summary_tex"], summary_md=out["summary_md"],
                    macros=out["macros"])
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def _run(args: argparse.Namespace) -> int:
    cases, settings = load_config(args.config)
    overrides = {k: getattr(args, k) for k in ("iters", "warmup", "rounds")
                 if getattr(args, k) is not None}
    if args.allow_load:
        overrides["allow_load"] = True
    if overrides:
        settings = dataclasses.replace(settings, **overrides)
    chosen = select_cases(cases, args.case)
    if args.list:
        for c in chosen:
            print(f"{c.name}: {c.model} b{c.batch_size} P={c.world_size} {c.network} "
                  f"compute={c.compute} comm={c.comm}")
        return 0
    from gradsched.runtime.prelaunch import check_plans  # loads torch

    interference = parse_interference_args(args.interference)
    planned = []
    for case in chosen:  # every case planned, checked and admitted before the first starts
        case_plans = case_plans_for(case, settings, interference)
        numel = check_plans(  # the pre-launch gate: the plans against the model, on meta
            [(str(case.compute), plan) for plan in case_plans.plans.values()],
            model=case.model, batch_size=case.batch_size, seq_len=case.seq_len,
            hint=f" (case {case.name}'s plans are made from this trace: give the compute "
            f"trace of model {case.model!r})")
        admit_training(f"reexec run: case {case.name}", Training(
            model=case.model, batch_size=case.batch_size, seq_len=case.seq_len,
            device="cuda" if settings.backend == "nccl" else "cpu"),
            ranks=case.world_size, threads=settings.threads,
            oversubscribe=args.oversubscribe,
            extra_bytes_per_rank=executor_buffer_bytes(case, case_plans, numel))
        planned.append((case, case_plans))
    check_writable(args.output, directory=True)  # before the measurements
    for case, case_plans in planned:
        print(f"reexec run: {case.name} ...", flush=True)
        folder = run_case(case, settings, args.output, interference, case_plans)
        print(f"-> {folder}", flush=True)
    return 0


def _collect(args: argparse.Namespace) -> int:
    spec = parse_interference_args(args.interference)
    table = collect(args.folders, spec, args.output, args.iterations_csv,
                    args.provenance)
    cols = ["case", "algorithm", "predicted_s", "predicted_interference_s", "measured_s",
            "measured_p10_s", "measured_p90_s"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"-> {args.output}")
    return 0


def _interference(args: argparse.Namespace) -> int:
    comm_bytes, small_bytes = args.comm_bytes, args.small_bytes
    check_ranks("reexec interference", args.world_size, args.threads,
                oversubscribe=args.oversubscribe)
    if args.backend == "gloo":  # with nccl the buffers are in device memory
        check_memory("reexec interference", INTERFERENCE_BUFFERS * comm_bytes,
                     args.world_size, detail=f"{INTERFERENCE_BUFFERS} x --comm-bytes per rank",
                     proceed="lower --comm-bytes or --world-size")
    check_writable(args.output)  # before the measurement, not after it
    settings = Calibration(kernel=args.kernel, comm_bytes=comm_bytes, small_bytes=small_bytes,
                           rounds=args.rounds, reps=args.reps)
    where = Launch(world_size=args.world_size, backend=args.backend, threads=args.threads,
                   cluster=args.cluster, what="reexec interference")
    result = calibrate(settings, where, output=args.output)
    print(f"collective_cpu_s {result['collective_cpu_s']:.4g}  "
          f"compute_slowdown {result['compute_slowdown']:.4g}  "
          f"comm_slowdown {result['comm_slowdown']:.4g}  -> {args.output}")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    with Staging() as stage:  # every requested output, or none
        outputs = AnalysisOutputs(**{
            f.name: stage.file(getattr(args, f.name)) if getattr(args, f.name) else None
            for f in dataclasses.fields(AnalysisOutputs)})
        stats = write_analysis(analyze(args.input, args.iterations_csv), outputs)
    print(stats.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0
