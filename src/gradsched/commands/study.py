"""``gradsched study ...``: the predicting side's studies that run a set of cases and
write the frame they return as a CSV (the report formats it: ``gradsched report ...``).

    gradsched study ps-replay --case NAME CSV NETWORK P ALLREDUCE P2P ... \\
        --layout 1:separate ... -o ps.csv
    gradsched study topology-check --intra ONE-NODE.csv --sweep MULTI-NODE.csv ... -o check.csv
    gradsched study topology-replay --compute NAME CSV ... \\
        --topology NAME FILE flat|hierarchical ... [--measured NAME SWEEP.csv ...] -o topo.csv
    gradsched study scaling-check --spec config/published-scaling.yaml -o scaling.csv
    gradsched study sharded --case NAME COMPUTE NETWORK COMM P SEMANTICS ... -o sharded.csv
    gradsched study host-check --summary kineto-steps-summary.json TRACE.csv ... -o host.csv
    gradsched study at-scale --points POINTS.csv --comm GPU=MODEL ... -o at-scale.csv
    gradsched study overlap-slowdown --source GEN fit|validation PART TRACE ... \\
        --model-out model.json -o overlap.csv

Each verb parses its cases, calls one function of :mod:`gradsched.experiments` and writes its
frame; no logic lives here.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gradsched.commands._args import integer, parse_int, size
from gradsched.commands._outputs import output_file
from gradsched.commands._overlap import add_overlap_option
from gradsched.commands._study_at_scale import register_at_scale, register_unit_jitter
from gradsched.commands._study_stragglers import register_stragglers
from gradsched.errors import ConfigError
from gradsched.limits import MAX_REPLAY_ITERATIONS


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``study`` and its verbs: ``ps-replay``, ``topology-check``, ``topology-replay``,
    ``scaling-check``, ``sharded``, ``host-check``, ``stragglers``, ``at-scale``,
    ``overlap-slowdown``."""
    parser = sub.add_parser("study", help="run a study's cases (replays, checks) into a CSV")
    ssub = parser.add_subparsers(dest="study_command", metavar="STUDY", required=True)
    p = ssub.add_parser("ps-replay", help="compute traces replayed on all-reduce and on "
                        "parameter servers (BytePS-style, from a point-to-point sweep)")
    p.add_argument("--case", nargs=6, action="append", required=True,
                   metavar=("NAME", "CSV", "NETWORK", "P", "ALLREDUCE", "P2P"),
                   help="a compute trace on NETWORK at P workers: the all-reduce sweep or "
                        "model and the point-to-point sweep of the same links (repeatable)")
    p.add_argument("--layout", action="append", required=True, metavar="S[:colocated]",
                   help="server layout: S servers (an integer, or P for as many as "
                        "workers), :colocated with the workers or :separate (repeatable)")
    p.add_argument("--replay-iters", type=integer(2, MAX_REPLAY_ITERATIONS), default=5,
                   help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    p.set_defaults(func=_ps_replay)


    p = ssub.add_parser("topology-check", help="two-level topology (inter level identified "
                        "from the first multi-node sweep) vs every multi-node sweep")
    p.add_argument("--intra", required=True, help="one-node comm trace (the intra level)")
    p.add_argument("--sweep", nargs="+", required=True, type=Path,
                   help="multi-node all-ranks sweeps; the first identifies the inter level")
    p.add_argument("-o", "--output", type=output_file, required=True, help="check CSV")
    p.set_defaults(func=_topology_check)

    p = ssub.add_parser("topology-replay", help="compute traces replayed on two-level "
                        "topologies, flat vs hierarchical all-reduce (and on measured sweeps)")
    p.add_argument("--compute", nargs=2, action="append", required=True,
                   metavar=("NAME", "CSV"), help="compute trace (repeatable)")
    p.add_argument("--topology", nargs=3, action="append", required=True,
                   metavar=("NAME", "FILE", "COLLECTIVE"),
                   help="topology file and its collective model, flat or hierarchical "
                        "(repeatable)")
    p.add_argument("--measured", nargs=2, action="append", default=[],
                   metavar=("NAME", "SWEEP"),
                   help="the measured all-ranks sweep of topology NAME's cluster and world "
                        "size, replayed as the reference (repeatable)")
    p.add_argument("--algorithms", default="wfbp,ddp,mgwfbp",
                   help="comma-separated planners (default wfbp,ddp,mgwfbp)")
    p.add_argument("--replay-iters", type=integer(2, MAX_REPLAY_ITERATIONS), default=5,
                   help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    add_overlap_option(p)
    p.set_defaults(func=_topology_replay)


    p = ssub.add_parser("scaling-check", help="predict published multi-GPU throughput "
                        "(DDP replay of a GPU trace) and compare")
    p.add_argument("--spec", type=Path, required=True,
                   help="YAML of published results (config/published-scaling.yaml)")
    # no --replay-iters: the check replays DDP, whose iterations repeat exactly from the
    # first (every one starts after the last all-reduce), so their count changes nothing
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    add_overlap_option(p)
    p.set_defaults(func=_scaling_check)


    p = ssub.add_parser("overlap-slowdown", help="compute kernels with and without an NCCL "
                        "kernel beside them (Kineto traces): the per-GPU-generation slowdown, "
                        "fitted and validated")
    p.add_argument("--source", nargs=4, action="append", required=True,
                   metavar=("GENERATION", "ROLE", "PART", "TRACE"),
                   help="a Kineto trace (or rank archive) of GPU GENERATION, ROLE fit or "
                        "validation, PART all, first-half or second-half (repeatable)")
    p.add_argument("--model-out", type=output_file, required=True, metavar="JSON",
                   help="the per-generation model to write")
    p.add_argument("--groups-out", type=output_file, default=None, metavar="CSV",
                   help="also write every measured kernel group")
    p.add_argument("-o", "--output", type=output_file, required=True,
                   help="summary CSV to write (one row per generation and role)")
    p.set_defaults(func=_overlap_slowdown)

    p = ssub.add_parser("host-check", help="the host-aware replay and the single-stream "
                        "replay of traces with host columns vs hook-free CUDA-event iterations")
    p.add_argument("traces", nargs="+", type=Path,
                   help="compute traces with host columns, named <config>.csv")
    p.add_argument("--summary", type=Path, required=True,
                   help="CUDA-event medians per config (kineto-steps-summary.json)")
    p.add_argument("--launch-queue", type=integer(1, 1 << 24), default=1024,
                   help="launches the host may have pending (default 1024)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    p.set_defaults(func=_host_check)

    p = ssub.add_parser("sharded", help="every sharded planner and the optimum, replayed on "
                        "several cases")
    p.add_argument("--case", nargs=6, action="append", required=True,
                   metavar=("NAME", "COMPUTE", "NETWORK", "COMM", "P", "SEMANTICS"),
                   help="a compute trace (named NAME) on NETWORK (the comm sweep or model "
                        "COMM) at P ranks, SEMANTICS streams (GPU) or blocking (CPU, gloo) "
                        "(repeatable)")
    p.add_argument("--memory-cap", type=size(), default=None,
                   help="cap on gathered parameters and gradients for the optimum (bytes)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    add_overlap_option(p)
    p.set_defaults(func=_sharded)
    register_stragglers(ssub)

    register_at_scale(ssub)
    register_unit_jitter(ssub)


def _ps_replay(args: argparse.Namespace) -> int:
    from gradsched.experiments.ps import PSCase, parse_layout, ps_replay

    _once("--case", [(name, network, world) for name, _, network, world, _, _ in args.case],
          [" ".join(case) for case in args.case])
    cases = []
    for name, csv, network, world, allreduce, p2p in args.case:
        cases.append(PSCase(name, Path(csv), network, _ranks(name, world), allreduce, p2p))
    frame = ps_replay(cases, [parse_layout(v) for v in args.layout], args.replay_iters)
    return _write(args, frame)


def _once(option: str, keys: list[object], shown: list[str]) -> None:
    """Refuse a case given twice (each would write the same rows twice): ``keys`` are the
    cases' identities, ``shown`` how each is named in the message."""
    seen: dict[object, int] = {}
    for i, key in enumerate(keys):
        if key in seen:
            raise ConfigError(f"{option} {shown[i]} is given twice (as number {seen[key] + 1} "
                              f"and {i + 1}); give each case once")
        seen[key] = i


def _topology_check(args: argparse.Namespace) -> int:
    from gradsched.experiments.topology_check import topology_check

    _once("--sweep", [os.path.realpath(p) for p in args.sweep], [str(p) for p in args.sweep])
    frame = topology_check(args.intra, args.sweep)
    return _write(args, frame)


def _topology_replay(args: argparse.Namespace) -> int:
    from gradsched.experiments import expand_algorithms
    from gradsched.experiments.topology import TopologyCase, topology_replay

    measured = dict(args.measured)
    names = [name for name, _, _ in args.topology]
    _once("--topology", names, names)
    unknown = sorted(set(measured) - set(names))
    if unknown:
        raise ConfigError(f"--measured {unknown[0]}: no --topology of that name")
    computes = dict(args.compute)
    if len(computes) != len(args.compute):
        raise ConfigError("--compute: two traces share a name")
    cases = [TopologyCase(name, Path(file), collective,
                          Path(measured[name]) if name in measured else None)
             for name, file, collective in args.topology]
    frame = topology_replay(computes, cases, expand_algorithms(args.algorithms),
                            args.replay_iters, overlap=args.overlap_slowdown)
    return _write(args, frame)


def _scaling_check(args: argparse.Namespace) -> int:
    from gradsched.experiments.scaling import load_spec, scaling_check

    frame = scaling_check(load_spec(args.spec), overlap=args.overlap_slowdown)
    _write(args, frame)
    for row in frame.itertuples(index=False):
        print(f"{row.system}: 1 GPU {row.predicted_img_s_1:.0f} vs {row.published_img_s_1:.0f} "
              f"img/s ({row.error_1_pct:+.1f}%), {row.world_size} GPUs "
              f"{row.predicted_img_s_p:.0f} vs {row.published_img_s_p:.0f} img/s "
              f"({row.error_p_pct:+.1f}%), scaling {row.predicted_scaling:.2f}x vs "
              f"{row.published_scaling:.2f}x [{row.comm_model}]")
    return 0


def _sharded(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.commands._overlap import sharded_overlap
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.sharded.common import ShardedProblem
    from gradsched.experiments.sharded.optimum import compare
    from gradsched.traces.bundle import ComputeTrace

    _once("--case", [(name, network, world, mode) for name, _, network, _, world, mode
                     in args.case], [" ".join(case) for case in args.case])
    rows = []
    for name, compute, network, comm, world, mode in args.case:
        if mode not in ("streams", "blocking"):
            raise ConfigError(f"--case {name}: semantics must be streams or blocking, not "
                              f"{mode!r}")
        trace = ComputeTrace.load(compute)
        world_size = _ranks(name, world)
        slowdown = sharded_overlap(args, trace.meta, f"study sharded: {name}", mode)
        problem = ShardedProblem(trace, load_comm_spec(comm), world_size, semantics=mode,
                                 memory_cap_bytes=args.memory_cap,
                                 compute_slowdown=slowdown)
        for row in compare(problem):
            rows.append({"compute": name, "network": network, "world_size": world_size,
                         "semantics": mode, **row, "overlap_slowdown": slowdown})
    return _write(args, pd.DataFrame(rows))


def _ranks(case: str, text: str) -> int:
    """A case's P: an integer >= 2, or a ConfigError naming the case."""
    try:
        ranks = parse_int(text)
    except ValueError:
        raise ConfigError(f"--case {case}: P must be an integer, got {text!r}") from None
    if ranks < 2:
        raise ConfigError(f"--case {case}: P must be >= 2, got {ranks}")
    return ranks


def _host_check(args: argparse.Namespace) -> int:
    from gradsched.experiments.host_check import cases_from_summary, host_check, summary

    frame = host_check(cases_from_summary(args.traces, args.summary), args.launch_queue)
    _write(args, frame)
    stats = summary(frame)
    print(f"|error| median / worst: single-stream "
          f"{stats['single_stream_median_abs_error_pct']:.1f} / "
          f"{stats['single_stream_worst_abs_error_pct']:.1f} %, host-aware "
          f"{stats['host_aware_median_abs_error_pct']:.1f} / "
          f"{stats['host_aware_worst_abs_error_pct']:.1f} %")
    return 0


def _write(args: argparse.Namespace, frame: object) -> int:
    """The study's frame as ``--output`` (written atomically), and one line saying so."""
    from gradsched.io import write_csv_atomic

    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows)")  # type: ignore[arg-type]
    return 0


def _overlap_slowdown(args: argparse.Namespace) -> int:
    from gradsched.costmodel.overlap_slowdown import (
        OverlapSource,
        measure_and_fit,
        summary_frame,
    )
    from gradsched.io import write_csv_atomic, write_json_atomic
    from gradsched.traces.overlap_kernels import PARTS

    sources = []
    for gen, role, part, trace in args.source:
        if role not in ("fit", "validation") or part not in PARTS:
            raise ConfigError(f"--source {gen} {role} {part} {trace}: ROLE must be fit or "
                              f"validation and PART one of {', '.join(PARTS)}")
        sources.append(OverlapSource(gen, role, part, trace))
    groups, model = measure_and_fit(sources)
    write_json_atomic(args.model_out, model)
    if args.groups_out is not None:
        write_csv_atomic(args.groups_out, groups)
    _write(args, summary_frame(model))
    for gen, entry in sorted(model["generations"].items()):
        val = entry["validation"] or {}
        print(f"{gen}: slowdown {entry['slowdown']:g}; fit error {entry['fit']['error_fitted']}"
              f", validation error {val.get('error_fitted')} (no effect "
              f"{val.get('error_no_effect')}, physical {val.get('error_physical')})")
    return 0
