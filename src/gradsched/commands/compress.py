"""``gradsched compress train|profile|report``: gradient compression experiments.

    gradsched compress train [--world-size 4] [--methods dense,topk,importance] \\
        [--densities 1/16,1/64,1/256] [--seeds 0,1,2] [--steps 400] [--eval-every 20] \\
        -o paper/data/compression
    gradsched compress profile --methods dense,topk,importance --densities 1/16,1/64,1/256 \\
        [--world-size 4] [--sizes 1K,...,4M] [--reps 7] -o profile.csv
    gradsched compress report --input paper/data/compression --figdir paper/figures \\
        --tabdir paper/tables

``train`` runs the real data-parallel training (gloo ranks on loopback, scikit-learn's
digits; :mod:`gradsched.compression.train`) and writes ``curves.csv``, ``summary.csv`` and
``settings.json``. ``profile`` times each compressor's *own* computation per bucket size
on this machine (one process; collectives replaced by copies) and writes one row per
(method, density, size), plus ``<output>.meta.json`` (settings, environment): what
:mod:`gradsched.compression.pricing` adds before each collective. ``report`` draws the
figures and writes the table (:mod:`gradsched.report.compression`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradsched.admission import check_memory, check_points, check_ranks
from gradsched.commands._args import (
    add_oversubscribe,
    count,
    int_list,
    integer,
    parse_real,
    positive_seconds,
    real,
    size,
    threads,
)
from gradsched.commands._outputs import output_file, output_folder
from gradsched.errors import ConfigError, InputError
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.limits import MAX_RANKS
from gradsched.provenance import (
    architecture,
    load_average,
    logical_cpus,
    python_version,
    torch_version,
)
from gradsched.report.compression import write_all
from gradsched.staging import check_writable


def _names(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _densities(text: str) -> tuple[float, ...]:
    from gradsched.compression.base import parse_density  # the compressors import torch

    out = []
    for token in _names(text):
        for number in token.removesuffix("x").split("/", 1):  # ASCII digits only
            try:
                parse_real(number)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"density {token!r}: expected a number in (0, 1], 1/64 or 64x") from None
        try:
            out.append(parse_density(token))
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r}: expected densities like 1/16,1/64")
    return tuple(out)


_densities.__name__ = "numbers"

_ints = int_list(0, 2**62, example="0,1,2")
_size = size()


def _sizes(text: str) -> tuple[int, ...]:
    values = tuple(_size(v) for v in _names(text))
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: expected sizes like 1M,16M")
    return values


_sizes.__name__ = "size"

PROFILE_BUFFERS = 8
"""Bucket-sized fp32 buffers ``compress profile`` holds at once (gradient, parameter,
momentum, residual, the compressor's values, indices and scratch)."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("compress", help="gradient compression: train, profile, report",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = parser.add_subparsers(dest="compress_command", metavar="WHAT", required=True)

    p = csub.add_parser("train", help="real data-parallel training with compression (gloo)")
    p.add_argument("--world-size", type=integer(1, 1024), default=4)
    p.add_argument("--methods", type=_names, default=("dense", "topk", "importance"))
    p.add_argument("--densities", type=_densities, default=(1 / 16, 1 / 64, 1 / 256),
                   help="e.g. 1/16,1/64,1/256")
    p.add_argument("--seeds", type=_ints, default=(0, 1, 2))
    p.add_argument("--steps", type=count, default=400)
    p.add_argument("--eval-every", type=count, default=20)
    p.add_argument("--batch-size", type=integer(1, 2**20), default=32,
                   help="samples per rank (default 32)")
    p.add_argument("--lr", type=real(0.0, 1e3, low_open=True), default=0.05)
    p.add_argument("--momentum", type=real(0.0, 1.0), default=0.9)
    p.add_argument("--deadline-s", type=positive_seconds, default=3600.0)
    add_oversubscribe(p)
    p.add_argument("-o", "--output", type=output_folder, required=True, help="output folder")
    p.set_defaults(func=_train)

    p = csub.add_parser("profile", help="time each compressor's own computation per size")
    p.add_argument("--methods", type=_names, default=("dense", "topk", "importance"))
    p.add_argument("--densities", type=_densities, default=(1 / 16, 1 / 64, 1 / 256))
    p.add_argument("--world-size", type=integer(1, MAX_RANKS), default=4,
                   help="P the post-collective work is sized for (default 4)")
    p.add_argument("--sizes", type=_sizes,
                   default=(1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22),
                   help="bucket sizes in elements, e.g. 1K,64K,4M")
    p.add_argument("--reps", type=count, default=7, help="timed calls per point (median)")
    p.add_argument("--threads", type=threads, default=1,
                   help="torch intra-op threads")
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=_profile)

    p = csub.add_parser("report", help="figures and table from committed results")
    p.add_argument("--input", type=Path, required=True,
                   help="folder with curves.csv and summary.csv")
    p.add_argument("--figdir", type=output_folder, required=True)
    p.add_argument("--tabdir", type=output_folder, required=True)
    p.set_defaults(func=_report)


def _train(args: argparse.Namespace) -> int:
    from gradsched.compression.train import TrainSettings, run_experiment  # imports torch

    check_ranks("compress train", args.world_size, oversubscribe=args.oversubscribe)
    check_points("compress train", len(args.methods) * len(args.densities) * len(args.seeds),
                 limit=10_000, proceed="give fewer methods, densities or seeds")
    check_writable(args.output, directory=True)  # before the training, not after it

    settings = TrainSettings(world_size=args.world_size, methods=args.methods,
                             densities=args.densities, seeds=args.seeds, steps=args.steps,
                             eval_every=args.eval_every, batch_per_rank=args.batch_size,
                             lr=args.lr, momentum=args.momentum)
    out = run_experiment(settings, args.output, log=lambda m: print(m, file=sys.stderr),
                         deadline_s=args.deadline_s)
    for row in out["summary"]:
        print(f"{row['method']:>10} density {row['density']:.6g}: final accuracy "
              f"{row['final_accuracy_mean']:.4f} +- {row['final_accuracy_std']:.4f}, "
              f"{row['bytes_per_step']:.0f} B/step ({row['compression_ratio']:.1f}x)")
    return 0


def _profile(args: argparse.Namespace) -> int:
    from gradsched.compression.profile import profile_compressors  # the compressors import torch

    check_points("compress profile", len(args.methods) * len(args.densities) * len(args.sizes),
                 proceed="give fewer methods, densities or sizes")
    check_memory("compress profile", PROFILE_BUFFERS * 4 * max(args.sizes), 1,
                 detail=f"{PROFILE_BUFFERS} fp32 buffers of the largest bucket, "
                        f"{max(args.sizes)} elements",
                 proceed="give smaller --sizes")
    check_writable(args.output)  # before the timing, not after it
    frame = profile_compressors(args.methods, args.densities, args.sizes,
                                world_size=args.world_size, reps=args.reps,
                                threads=args.threads)
    write_csv_atomic(args.output, frame)
    meta = args.output.with_suffix(".meta.json")
    write_json_atomic(meta, {
        "what": "compute time of each compressor's own work per bucket (median and min of "
                "reps calls after one warm-up), one process, collectives replaced by copies "
                "(gradsched.compression.base.LocalComm)",
        "command": "gradsched compress profile " + " ".join(sys.argv[3:]),
        "methods": list(args.methods), "densities": list(args.densities),
        "world_size": args.world_size, "sizes_elements": list(args.sizes), "reps": args.reps,
        "threads": args.threads, "momentum": 0.9,
        "environment": {"python": python_version(), "torch": torch_version(),
                        "machine": architecture(), "cpu_count": logical_cpus(),
                        "loadavg_1_5_15min": load_average()},
        "units": {"compute_s": "seconds", "numel": "elements", "bytes": "bytes (fp32)"},
    })
    print(f"wrote {len(frame)} rows to {args.output} (+ {meta.name})", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    if not args.input.is_dir():  # a misspelt folder would draw empty figures silently
        raise InputError("input folder not found (expected curves.csv and summary.csv)",
                         path=args.input)
    for path in write_all(args.input, args.figdir, args.tabdir):
        print(path)
    return 0
