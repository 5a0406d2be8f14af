"""``gradsched capture compute|iteration|comm``: measure real traces with PyTorch.

* ``compute`` -- per-tensor forward/backward/update times and the gradient ready order of a
  model (:mod:`gradsched.capture.compute`), written as a compute trace bundle;
* ``iteration`` -- real DDP iterations under ``torch.profiler`` for several bucket sizes,
  one Kineto trace per rank plus a summary (:mod:`gradsched.capture.iteration`);
* ``comm`` -- collective sweeps on loopback or an emulated cluster
  (:mod:`gradsched.capture.sweep`, registered from there).
"""

from __future__ import annotations

import argparse
import sys

from gradsched.commands._args import non_negative_count, positive_int, positive_seconds
from gradsched.commands._outputs import output_file, output_folder
from gradsched.errors import ConfigError
from gradsched.staging import check_writable


def _caps(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 1,25") from None
    if not values or any(not 0 < v <= 2**30 for v in values):  # NaN and inf fail too
        raise argparse.ArgumentTypeError(f"{text!r}: expected finite positive numbers of "
                                         "MB like 1,25")
    return values


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
    p.add_argument("--threads", type=positive_int, default=None,
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
    p.add_argument("--world-size", type=positive_int, default=2,
                   help="local ranks (ignored with --torchrun)")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--bucket-cap-mb", type=_caps, default=[25.0],
                   help="comma-separated DDP bucket caps in MB (default 25)")
    p.add_argument("--iters", type=positive_int, default=3, help="profiled iterations")
    p.add_argument("--warmup", type=non_negative_count, default=2,
                   help="unprofiled iterations first")
    p.add_argument("--threads-per-rank", type=positive_int, default=1)
    p.add_argument("--deadline-s", type=positive_seconds, default=1800.0,
                   help="bound on the whole local run")
    p.add_argument("--torchrun", action="store_true",
                   help="run under torchrun: ranks from the environment; rank 0 writes")
    p.add_argument("-o", "--output", type=output_folder, required=True, help="output folder")
    p.set_defaults(func=_run_iteration)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``gradsched capture ...``."""
    parser = sub.add_parser("capture", help="capture real traces with PyTorch (compute, "
                            "profiled iterations, collective sweeps)")
    csub = parser.add_subparsers(dest="capture_command", metavar="WHAT", required=True)
    _add_compute(csub)
    _add_iteration(csub)
    try:
        from gradsched.capture.sweep import register_cli
    except ImportError as exc:  # the sweep module is optional until it exists
        p = csub.add_parser("comm", help="collective sweeps (unavailable: see --help)")
        p.set_defaults(func=lambda _a, exc=exc: _unavailable(exc))
    else:
        register_cli(csub)
        for action in csub.choices["comm"]._actions:  # the sweep's CSV, checked up front
            if action.dest == "output":
                action.type = output_file


def _unavailable(exc: Exception) -> int:
    raise ConfigError(f"capture comm is unavailable: {exc}")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run_compute(args: argparse.Namespace) -> int:
    from gradsched.capture.compute import CaptureOptions, capture_compute

    if args.output.suffix != ".csv":
        raise ConfigError(f"output {args.output}: expected a .csv path (the sidecar goes "
                          "beside it)")
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
    from gradsched.capture.iteration import (
        IterationOptions,
        capture_iterations,
        capture_iterations_torchrun,
    )

    opts = IterationOptions(
        model=args.model, batch_size=args.batch_size, world_size=args.world_size,
        backend=args.backend, bucket_caps_mb=args.bucket_cap_mb, iters=args.iters,
        warmup=args.warmup, device=args.device, dtype=args.dtype, seq_len=args.seq_len,
        threads_per_rank=args.threads_per_rank, deadline_s=args.deadline_s)
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
