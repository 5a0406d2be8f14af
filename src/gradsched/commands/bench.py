"""``gradsched bench collectives|collectives-fit|collectives-tune|collectives-report``.

    gradsched bench collectives --algorithms default,lp,ring,mst,rd,rhd \\
        --collective all_reduce --world-size 2,3,4 --min-bytes 4 --max-bytes 16M \\
        [--cluster 1gbit] [--lp-chunk BYTES] [--tuned-out tuned.json] -o OUT.csv
    gradsched bench collectives-fit OUT.csv... -o fit.json --errors errors.csv
    gradsched bench collectives-tune OUT.csv... [--fit fit.json] -o tuned.json
    gradsched bench collectives-report OUT.csv... --fit fit.json --errors errors.csv \\
        --figdir paper/figures --tabdir paper/tables

``collectives`` times gradsched's point-to-point algorithms (:mod:`gradsched.collectives`)
and the library's own collective (``default``) and writes a comm trace with the
``algorithm`` column; ``collectives-fit`` fits the alpha-beta-gamma formulas per network
(joint and per algorithm) and writes the per-size relative errors;
``collectives-tune`` writes a ``tuned`` model JSON (``--comm tuned.json`` in the replay);
``collectives-report`` draws the figures and writes the table
(:mod:`gradsched.report.collectives`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradsched.commands._args import (
    add_oversubscribe,
    count,
    int_list,
    integer,
    parse_real,
    positive_seconds,
    real,
    size,
)
from gradsched.commands._outputs import output_file, output_folder
from gradsched.limits import MAX_RANKS

_sizes = size()
_ints = int_list(1, MAX_RANKS, example="2,3,4", what="world sizes")


def _names(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="benchmark gradsched's collective algorithms")
    bsub = parser.add_subparsers(dest="bench_command", required=True)

    p = bsub.add_parser("collectives", help="time collective algorithms; write a comm trace")
    p.add_argument("--algorithms", type=_names, default=("default", "lp", "ring", "mst", "rd",
                                                         "rhd"),
                   help="comma-separated: default (the library's), lp, ring, mst, rd, rhd")
    p.add_argument("--collective", default="all_reduce",
                   help="all_reduce (default), broadcast, reduce, reduce_scatter, all_gather")
    p.add_argument("--world-size", type=_ints, default=(2,), help="e.g. 4 or 2,3,4")
    p.add_argument("--min-bytes", type=_sizes, default=4)
    p.add_argument("--max-bytes", type=_sizes, default=1 << 24, help="e.g. 16M")
    p.add_argument("--per-octave", type=integer(1, 64), default=1, help="sizes per doubling")
    p.add_argument("--min-iters", type=count, default=5, help="timed calls per point, at least")
    p.add_argument("--max-iters", type=count, default=30, help="timed calls per point, at most")
    p.add_argument("--target-s", type=real(0.0, 3600.0, low_open=True, unit="s"), default=0.1,
                   help="about this much time of timed calls per point")
    p.add_argument("--lp-chunk", type=_sizes, default=None,
                   help="LP chunk in bytes (default: Wang et al.'s optimal b* for --lp-link)")
    p.add_argument("--lp-link", default=None,
                   help="alpha,beta,gamma (s, s/byte, s/byte) for the optimal LP chunk")
    p.add_argument("--cluster", default=None, metavar="RATE",
                   help="run in an emulated cluster (network namespaces, tc tbf RATE, e.g. "
                        "1gbit; needs root)")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--timeout-s", type=positive_seconds, default=300.0,
                   help="limit on every collective wait (default 300)")
    p.add_argument("--deadline-s", type=positive_seconds, default=1800.0)
    p.add_argument("--note", default=None, help="replace the shared-machine note")
    p.add_argument("--tuned-out", type=output_file, default=None,
                   help="also write a tuned model JSON from this sweep")
    add_oversubscribe(p)
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=_collectives)

    p = bsub.add_parser("collectives-fit",
                        help="fit the alpha-beta-gamma formulas to per-algorithm sweeps")
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--time-column", default="time_s", choices=("time_s", "time_min_s"))
    p.add_argument("--gamma", default="auto",
                   help="reduction cost in s/byte (fixed), 'auto' (the bench's measurement "
                        "when every trace has one, else fitted) or 'fit'")
    p.add_argument("-o", "--output", type=output_file, required=True, help="fit JSON")
    p.add_argument("--errors", type=output_file, default=None,
                   help="per-size relative errors (CSV)")
    p.set_defaults(func=_fit)

    p = bsub.add_parser("collectives-tune", help="write a tuned model JSON (fastest algorithm)")
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--source", default="both", choices=("measured", "analytic", "both"))
    p.add_argument("--fit", type=Path, default=None, help="fit JSON (default: fit here)")
    p.add_argument("--network", default=None, help="loopback or a cluster rate")
    p.add_argument("--candidates", type=_names, default=None,
                   help="algorithms it may choose (default: all measured, default included)")
    p.add_argument("--time-column", default="time_s", choices=("time_s", "time_min_s"))
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=_tune)

    p = bsub.add_parser("collectives-report", help="figures and table of the sweeps")
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--fit", type=Path, required=True)
    p.add_argument("--errors", type=Path, required=True)
    p.add_argument("--figdir", type=output_folder, required=True)
    p.add_argument("--tabdir", type=output_folder, required=True)
    p.add_argument("--prefix", default="collectives")
    p.set_defaults(func=_report)


def _collectives(args: argparse.Namespace) -> int:
    from gradsched.collectives.bench import SHARED_MACHINE_NOTE, BenchConfig, run_bench
    from gradsched.errors import ConfigError
    from gradsched.limits import MAX_SECONDS, in_range
    from gradsched.staging import check_writable

    link = None
    if args.lp_link:
        try:
            a, b, g = (parse_real(v) for v in args.lp_link.split(","))
        except ValueError:
            raise ConfigError(f"--lp-link {args.lp_link!r}: expected alpha,beta,gamma") from None
        if not all(in_range(v, 0.0, MAX_SECONDS) for v in (a, b, g)):
            raise ConfigError(f"--lp-link {args.lp_link!r}: alpha, beta and gamma must be "
                              f"finite numbers in [0, {MAX_SECONDS:g}]")
        link = (a, b, g)
    config = BenchConfig(
        collective=args.collective, algorithms=args.algorithms, world_sizes=args.world_size,
        min_bytes=args.min_bytes, max_bytes=args.max_bytes, per_octave=args.per_octave,
        min_iters=args.min_iters, max_iters=args.max_iters, target_s=args.target_s,
        lp_chunk_bytes=args.lp_chunk, lp_link=link, cluster_rate=args.cluster,
        backend=args.backend, op_timeout_s=args.timeout_s, deadline_s=args.deadline_s,
        note=args.note if args.note is not None else SHARED_MACHINE_NOTE,
        oversubscribe=args.oversubscribe)
    config.validate()
    config.admit()  # before any rank starts
    for out in (args.output, args.tuned_out):  # before the benchmark, not after it
        if out is not None:
            check_writable(out)
    trace = run_bench(config, log=lambda m: print(m, file=sys.stderr))
    trace.save(args.output)
    print(f"wrote {args.output} ({len(trace.frame)} rows, {trace.meta['wall_s']:.0f} s)")
    if args.tuned_out is not None:
        from gradsched.costmodel.tuned import build_tuned

        build_tuned([args.output]).save(args.tuned_out)
        print(f"wrote {args.tuned_out}")
    return 0


def _fit(args: argparse.Namespace) -> int:
    from gradsched.costmodel.tuned import fit_formulas, fits_to_json, load_samples
    from gradsched.errors import ConfigError
    from gradsched.io import write_csv_atomic, write_json_atomic

    gamma: float | str = args.gamma
    if gamma not in ("auto", "fit"):
        try:
            gamma = parse_real(gamma)
        except ValueError:
            raise ConfigError(f"--gamma {args.gamma!r}: a number, auto or fit") from None
        if not 0.0 <= gamma <= 1.0:  # NaN fails too
            raise ConfigError(f"--gamma {args.gamma!r}: seconds per byte in [0, 1]")
    samples = load_samples(args.traces, args.time_column)
    fits, errors = fit_formulas(samples, args.time_column, gamma)
    write_json_atomic(args.output, fits_to_json(fits, [p.stem for p in args.traces]))
    if args.errors is not None:
        write_csv_atomic(args.errors, errors)
    for fit in fits:
        a, b, g = fit.joint
        print(f"{fit.network}: joint alpha={a * 1e6:.1f}us beta={b:.3g}s/B gamma={g:.3g}s/B "
              f"MAPE {fit.mape_pct['joint']:.1f}%")
        for alg, (a, b, _) in sorted(fit.per_algorithm.items()):
            print(f"  {alg:5s} alpha={a * 1e6:.1f}us beta={b:.3g}s/B "
                  f"MAPE {fit.mape_pct[alg]:.1f}%")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from gradsched.costmodel.tuned import build_tuned, fits_from_json, load_samples
    from gradsched.io import read_json

    fit = None
    network = args.network
    if args.fit is not None:
        fits = fits_from_json(read_json(args.fit, missing="fit JSON not found"))
        if network is None:
            nets = sorted(load_samples(args.traces, args.time_column)["network"].unique())
            network = nets[0] if len(nets) == 1 else None
        fit = fits.get(network) if network is not None else None
    model = build_tuned(args.traces, args.source, fit, network, args.candidates,
                        args.time_column)
    model.save(args.output)
    print(f"wrote {args.output} (network {model.meta['network']}, source {args.source})")
    return 0


def _report(args: argparse.Namespace) -> int:
    from gradsched.experiments.collectives import collectives_frames
    from gradsched.report.collectives import write_all

    frames = collectives_frames(args.traces, args.fit)
    for path in write_all(frames, args.errors, args.figdir, args.tabdir, args.prefix):
        print(f"wrote {path}")
    return 0
