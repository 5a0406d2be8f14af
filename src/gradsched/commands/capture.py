"""``gradsched capture compute|iteration|comm``: measure real traces with PyTorch.

* ``compute`` -- per-tensor forward/backward/update times and the gradient ready order of a
  model (:mod:`gradsched.capture.compute`), written as a compute trace bundle;
* ``iteration`` -- real DDP iterations under ``torch.profiler`` for several bucket sizes,
  one Kineto trace per rank plus a summary (:mod:`gradsched.capture.iteration`);
* ``comm`` -- collective sweeps on loopback or an emulated cluster
  (:mod:`gradsched.capture.sweep`).

Every option goes through the hardened types of :mod:`gradsched.commands._args`, and every
launch is admitted (:mod:`gradsched.admission`) before a rank starts; under ``--torchrun``
the environment is checked first (:mod:`gradsched.runtime.prelaunch`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gradsched.commands._admit import Training, admit_training
from gradsched.commands._args import (
    add_oversubscribe,
    count,
    non_negative_count,
    positive_int,
    positive_seconds,
    real,
    real_list,
    size,
    threads,
    world_size,
)
from gradsched.commands._outputs import output_file, output_folder
from gradsched.errors import ConfigError
from gradsched.staging import check_writable

if TYPE_CHECKING:
    from gradsched.capture.sweep_settings import SweepConfig

_caps = real_list(0.0, 2**30, low_open=True, unit="MB", example="1,25",
                  what="expected finite positive numbers of MB")
"""DDP bucket caps: comma-separated finite numbers of MB in (0, 2**30]."""

DEFAULT_COLLECTIVES = "all_reduce,reduce_scatter,all_gather,broadcast"


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="zoo name (resnet50, densenet121, bert-base, gpt2, tiny-mlp, ...) or "
                   "package.module:attr")
    p.add_argument("--batch-size", type=positive_int, required=True, help="per rank")
    p.add_argument("--seq-len", type=positive_int, default=None,
                   help="tokens per sample for transformer models (default 128)")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")


def _add_compute(csub: argparse._SubParsersAction) -> None:
    p = csub.add_parser("compute", help="per-tensor compute trace of a model (hooks)",
                        description="Capture a compute trace: forward time per layer, backward "
                        "time and ready order per gradient, update time per tensor.")
    _model_flags(p)
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--warmup", type=positive_int, default=2,
                   help="unmeasured iterations (>= 1; the first discovers the layers)")
    p.add_argument("--iters", type=positive_int, default=5,
                   help="measured iterations (each with and without hooks)")
    p.add_argument("--threads", type=threads, default=None,
                   help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="CPU timing: wall clock (perf_counter) or the compute thread's CPU "
                   "time (thread_time; needs --threads 1; excludes waiting for a core on a "
                   "shared machine)")
    p.add_argument("--no-update", action="store_true",
                   help="do not time the per-tensor optimizer update (update_s = 0)")
    p.add_argument("--note", default="", help="text appended to the sidecar's source")
    p.add_argument("-o", "--output", type=output_file, required=True,
                   help="output CSV, e.g. traces/compute/cpu/resnet50-b32-cpu-fp32.csv")
    p.set_defaults(func=_run_compute)


def _add_iteration(csub: argparse._SubParsersAction) -> None:
    p = csub.add_parser("iteration", help="profiled DDP iterations (Kineto traces per rank)",
                        description="Run DDP iterations under torch.profiler for each bucket "
                        "cap; write one Kineto trace per rank and a summary.")
    _model_flags(p)
    p.add_argument("--world-size", type=world_size, default=None,
                   help="local ranks (default 2); with --torchrun, if given, it must equal "
                        "torchrun's WORLD_SIZE")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--bucket-cap-mb", type=_caps, default=[25.0],
                   help="comma-separated DDP bucket caps in MB (default 25)")
    p.add_argument("--iters", type=positive_int, default=3, help="profiled iterations")
    p.add_argument("--warmup", type=non_negative_count, default=2,
                   help="unprofiled iterations first")
    p.add_argument("--threads", type=threads, default=1, help="intra-op threads per rank")
    p.add_argument("--deadline-s", type=positive_seconds, default=1800.0,
                   help="bound on the whole local run")
    p.add_argument("--torchrun", action="store_true",
                   help="run under torchrun: ranks from the environment; rank 0 writes")
    add_oversubscribe(p)
    p.add_argument("-o", "--output", type=output_folder, required=True, help="output folder")
    p.set_defaults(func=_run_iteration)


def _add_comm(csub: argparse._SubParsersAction) -> None:
    from gradsched.traces.columns import COLLECTIVES

    p = csub.add_parser(
        "comm", help="sweep collectives with torch.distributed and write a comm trace",
        description="Measure each collective at message sizes from --min-bytes to "
        "--max-bytes (growing by --factor) and write a comm trace plus its sidecar "
        "(method: gradsched.capture.sweep).")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--world-size", type=world_size, default=None,
                   help="ranks to start locally (default 2); with --torchrun, if given, it "
                        "must equal torchrun's WORLD_SIZE")
    p.add_argument("--collectives", default=DEFAULT_COLLECTIVES,
                   help="comma-separated, from: " + ", ".join(COLLECTIVES) + "; or all")
    p.add_argument("--min-bytes", type=size(), default=4, help="smallest message (64K, 1M, ...)")
    p.add_argument("--max-bytes", type=size(), default=1 << 20,
                   help="largest message (binary suffixes)")
    p.add_argument("--factor", type=real(1.0, 2.0**20, low_open=True), default=2.0,
                   help="size growth factor (> 1)")
    p.add_argument("--iters", type=count, default=50,
                   help="most timed iterations per size (default 50)")
    p.add_argument("--warmup", type=count, default=3,
                   help="most warm-up iterations per size, >= 1 (default 3)")
    p.add_argument("--min-iters", type=count, default=3,
                   help="fewest timed iterations per size (default 3)")
    p.add_argument("--time-budget-s", type=positive_seconds, default=1.0,
                   help="about this many seconds of timed operations per size (default 1)")
    p.add_argument("--in-place", action="store_true",
                   help="all_gather / reduce_scatter in place (the others always are)")
    p.add_argument("--threads", type=threads, default=1, help="intra-op threads per rank")
    p.add_argument("--cluster", metavar="RATE", default=None,
                   help="run the ranks in an emulated cluster of network namespaces with "
                   "links shaped to RATE (tc units: 100mbit, 1gbit, 10gbit); needs root")
    p.add_argument("--torchrun", action="store_true",
                   help="run under torchrun (multi-node): take rank and world size from "
                   "the environment; rank 0 writes the output")
    p.add_argument("--init-timeout-s", type=positive_seconds, default=60.0)
    p.add_argument("--timeout-s", type=positive_seconds, default=None,
                   help="timeout of one collective (default: from the largest size)")
    p.add_argument("--deadline-s", type=positive_seconds, default=None,
                   help="bound on the whole run (default: estimated from the sizes)")
    p.add_argument("--note", default=None, help="text appended to the sidecar's notes")
    add_oversubscribe(p)
    p.add_argument("-o", "--output", type=output_file, required=True, help="output CSV")
    p.set_defaults(func=_run_comm)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``gradsched capture ...``."""
    parser = sub.add_parser("capture", help="capture real traces with PyTorch (compute, "
                            "profiled iterations, collective sweeps)")
    csub = parser.add_subparsers(dest="capture_command", metavar="WHAT", required=True)
    _add_compute(csub)
    _add_iteration(csub)
    _add_comm(csub)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run_compute(args: argparse.Namespace) -> int:
    from gradsched.capture.compute import CaptureOptions, capture_compute

    if args.output.suffix != ".csv":
        raise ConfigError(f"output {args.output}: expected a .csv path (the sidecar goes "
                          "beside it)")
    # one process: only its memory is checked
    admit_training("capture compute", Training(
        model=args.model, batch_size=args.batch_size, seq_len=args.seq_len, dtype=args.dtype,
        device=args.device), ranks=1, threads=args.threads or 1, oversubscribe=True)
    check_writable(args.output)  # before the measurement, not after it
    options = CaptureOptions(
        model=args.model, batch_size=args.batch_size, device=args.device, dtype=args.dtype,
        seq_len=args.seq_len, warmup=args.warmup, iters=args.iters, threads=args.threads,
        measure_update=not args.no_update, machine_note=args.note, clock=args.clock)
    trace = capture_compute(options, progress=_progress)
    trace.save(args.output)
    m = trace.meta
    for warning in m["warnings"]:
        print(f"warning: {args.output}: {warning}", file=sys.stderr)
    print(f"wrote {args.output} ({trace.n_tensors} tensors, {trace.total_bytes} gradient "
          f"bytes)")
    print(f"  iteration {m['iteration_s'] * 1e3:.2f} ms with hooks, "  # clock: m['clock']
          f"{m['iteration_nohooks_s'] * 1e3:.2f} ms without "
          f"(overhead {m['capture_overhead'] * 100:+.1f}%)")
    print(f"  backward: rows sum {m['backward_rows_sum_s'] * 1e3:.2f} ms vs measured "
          f"{m['backward_measured_s'] * 1e3:.2f} ms ({m['backward_rows_rel_error'] * 100:+.1f}%)")
    if "correction" in m:  # CUDA: rows rescaled to the hook-free iteration
        c = m["correction"]
        print(f"  rows rescaled to the hook-free iteration: forward x {c['forward_factor']:.3f}"
              f", backward x {c['backward_factor']:.3f} (host_bound {c['host_bound']})")
    return 0


def _run_iteration(args: argparse.Namespace) -> int:
    _settle_world_size(args)
    from gradsched.capture.iteration import (
        IterationOptions,
        capture_iterations,
        capture_iterations_torchrun,
    )

    opts = IterationOptions(
        model=args.model, batch_size=args.batch_size, world_size=args.world_size,
        backend=args.backend, bucket_caps_mb=args.bucket_cap_mb, iters=args.iters,
        warmup=args.warmup, device=args.device, dtype=args.dtype, seq_len=args.seq_len,
        threads_per_rank=args.threads, deadline_s=args.deadline_s)
    admit_training("capture iteration", Training(
        model=args.model, batch_size=args.batch_size, seq_len=args.seq_len, dtype=args.dtype,
        device=args.device), ranks=1 if args.torchrun else args.world_size,
        threads=args.threads, oversubscribe=args.oversubscribe)
    check_writable(args.output, directory=True)  # before the measurement
    if args.torchrun:
        summary = capture_iterations_torchrun(opts, args.output)
        if summary is None:
            return 0
    else:
        summary = capture_iterations(opts, args.output, progress=_progress)
    print(f"wrote {args.output} ({len(summary)} summary rows)")
    table = summary.groupby("bucket_cap_mb")[["iteration_s", "comm_s", "overlap_s"]].median()
    for cap, row in table.iterrows():
        print(f"  bucket {cap:g} MB: iteration {row['iteration_s'] * 1e3:.1f} ms, comm "
              f"{row['comm_s'] * 1e3:.1f} ms, overlap {row['overlap_s'] * 1e3:.1f} ms "
              "(medians)")
    return 0


def comm_config(args: argparse.Namespace) -> SweepConfig:
    """The :class:`~gradsched.capture.sweep_settings.SweepConfig` of parsed ``capture comm``
    arguments, validated (sizes, points, collectives, cluster rate); ``--world-size`` not
    given is :data:`DEFAULT_WORLD_SIZE`."""
    from gradsched.capture.sweep_settings import SweepConfig, parse_collectives
    from gradsched.distributed.shaping import parse_rate

    world = DEFAULT_WORLD_SIZE if args.world_size is None else args.world_size
    config = SweepConfig(
        world_size=world, backend=args.backend,
        collectives=parse_collectives(args.collectives),
        min_bytes=args.min_bytes, max_bytes=args.max_bytes,
        factor=args.factor, iters=args.iters, warmup=args.warmup, min_iters=args.min_iters,
        time_budget_s=args.time_budget_s, in_place=args.in_place,
        threads_per_rank=args.threads, cluster_rate=args.cluster,
        init_timeout_s=args.init_timeout_s, op_timeout_s=args.timeout_s,
        deadline_s=args.deadline_s, note=args.note, oversubscribe=args.oversubscribe)
    if args.cluster is not None:
        parse_rate(args.cluster)
        if args.torchrun:
            raise ConfigError("--cluster and --torchrun exclude each other")
    config.validate()
    return config


DEFAULT_WORLD_SIZE = 2
"""Local ranks when ``--world-size`` is not given."""


def _settle_world_size(args: argparse.Namespace) -> None:
    """``args.world_size``: the local ranks (``--world-size``, default
    :data:`DEFAULT_WORLD_SIZE`); under ``--torchrun`` torchrun's ``WORLD_SIZE``, which a
    given ``--world-size`` must equal. The torchrun variables are checked by the pre-launch
    gate (:func:`gradsched.runtime.prelaunch.check_torchrun_env`) before the process group:
    one line, not a C++ stack or a long wait."""
    if args.torchrun:
        from gradsched.runtime.prelaunch import check_torchrun_env

        args.world_size = check_torchrun_env(world_size=args.world_size).world_size
    elif args.world_size is None:
        args.world_size = DEFAULT_WORLD_SIZE


def _run_comm(args: argparse.Namespace) -> int:
    from gradsched.capture import sweep

    _settle_world_size(args)
    config = comm_config(args)
    out: Path = args.output
    if out.suffix != ".csv":
        raise ConfigError(f"output {out}: expected a .csv path (the sidecar goes beside it)")
    if args.torchrun:
        trace = sweep.run_torchrun(config, out)
        if trace is None:
            return 0
    else:
        trace = sweep.run_sweep(config, log=_progress)
        trace.save(out)
    frame = trace.frame
    print(f"wrote {out} ({len(frame)} rows, {trace.meta['wall_s']:.1f} s)")
    for coll, grp in frame.groupby("collective", sort=True):
        top = grp.iloc[-1]
        print(f"  {coll}: {int(top['bytes'])} B in {top['time_s'] * 1e3:.3f} ms, busbw "
              f"{top['busbw_Bps'] / 1e6:.1f} MB/s")
    for warning in trace.meta["warnings"]:
        print(f"warning: {out}: {warning}", file=sys.stderr)
    return 0
