"""``gradsched plan`` and ``gradsched replay``: make one plan; replay several algorithms.

``gradsched plan --emit ddp`` prints a plan as stock PyTorch DDP's ``bucket_cap_mb_list``
(:mod:`gradsched.planners.ddp_caps`, ``docs/ddp-caps.md``) and, with ``-o``, writes the caps
JSON; ``--from PLAN.json`` converts a plan written before instead of planning one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.commands._args import add_grad_accum, integer, real, seconds, world_size
from gradsched.commands._at_scale_note import print_at_scale_note
from gradsched.commands._outputs import output_file, output_folder
from gradsched.commands._overlap import add_overlap_option, with_overlap
from gradsched.commands._stragglers import add_stragglers, with_stragglers
from gradsched.costmodel.base import CommModel, load_comm_spec
from gradsched.costmodel.domain import RangeShares, row_shares
from gradsched.costmodel.domain_notes import domain_notes, print_notes
from gradsched.costmodel.ps import PSModel, load_ps
from gradsched.costmodel.topology import load_topology
from gradsched.errors import ConfigError, InputError
from gradsched.experiments import (
    check_knobs_used,
    compare,
    expand_algorithms,
    knobs_for,
    make_plan,
    parse_knob_args,
    resolve_world_size,
)
from gradsched.experiments.grid import CaseOutputs
from gradsched.experiments.recommend import plan_collectives
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.limits import MAX_REPLAY_ITERATIONS
from gradsched.plan import Plan
from gradsched.planners import ALGORITHMS_ALL, planner_names, replay_knobs
from gradsched.planners.ddp_caps import DdpCaps, ddp_caps
from gradsched.reexec.config import NO_INTERFERENCE, load_interference
from gradsched.replay.engine import (
    MAX_CHANNELS,
    MAX_FORWARD_RATIO,
    MAX_PACK_S_PER_BYTE,
    MAX_SLOWDOWN,
    ReplayOptions,
)
from gradsched.replay.host import DEFAULT_LAUNCH_QUEUE, HostReplayUnsupported
from gradsched.replay.prep import plan_range_shares
from gradsched.staging import Staging
from gradsched.ties import tied_min
from gradsched.traces.bundle import ComputeTrace, meta_path
from gradsched.traces.forward import with_forward

CAPS_FORMAT = "gradsched.ddp_caps"
DEFAULT_ITERATIONS = 5
"""Iterations the replay simulates unless --replay-iters says otherwise."""
COMM_HELP = ("comm trace CSV, fitted model JSON, or alpha-beta:alpha=<seconds>,"
             "beta=<seconds per byte>")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compute", required=True, type=Path, help="compute trace CSV")
    parser.add_argument("--comm", default=None, help=COMM_HELP + " (or --topology, --ps)")
    parser.add_argument("--topology", type=Path, default=None, metavar="FILE",
                        help="two-level cluster JSON/YAML {nodes, ranks_per_node, intra, inter} "
                        "(costmodel/topology.py) instead of --comm; world size = nodes x ranks")
    parser.add_argument("--topology-collective", choices=["flat", "hierarchical"],
                        default=None,
                        help="with --topology: one ring over all ranks, or reduce-scatter/"
                        "all-reduce/all-gather by level (default hierarchical)")
    parser.add_argument("--ps", default=None, metavar="FILE|SPEC",
                        help="parameter server instead of --comm (costmodel/ps.py): a JSON/YAML "
                        "file {workers, servers, colocated, partition_bytes, placement, p2p} or "
                        "inline servers=S,colocated=0|1[,workers=P][,partition_bytes=B]"
                        "[,placement=round-robin|balanced],p2p=<comm spec> (p2p last); "
                        "workers default to --world-size")
    parser.add_argument("--world-size", type=world_size, default=None,
                        help="number of ranks (default: the one world size the comm model holds)")
    parser.add_argument("--knob", action="append", default=[], metavar="[ALG.]NAME=VALUE",
                        help="planner knob, repeatable (e.g. ddp.bucket_cap_mb=50)")
    add_overlap_option(parser)
    parser.add_argument("--forward-ratio", type=real(0.0, MAX_FORWARD_RATIO), default=None,
                        metavar="R",
                        help="for a trace that did not measure forward (B-Caffe): assume "
                        "forward = R x backward (default 0.5, the MG-WFBP simulator's "
                        "assumption; 0 = the trace as written); refused for a measured one")
    add_grad_accum(parser, "scored planners score, and the replay replays, whole steps; "
                   "results then carry a grad_accum column")


def register(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser("plan", help="make one algorithm's plan (JSON), or a plan's DDP "
                          "bucket_cap_mb_list (--emit ddp)")
    _common(plan)
    plan.add_argument("--algorithm", default=None,
                      help=f"planner name, one of: {', '.join(planner_names())}")
    plan.add_argument("--from", dest="source", type=Path, default=None, metavar="PLAN.json",
                      help="convert this plan (written by 'gradsched plan' or 'replay --plans') "
                      "instead of planning one; needs --emit ddp")
    plan.add_argument("--emit", choices=["plan", "ddp"], default="plan",
                      help="plan: the plan JSON (default); ddp: print the "
                      "DistributedDataParallel(bucket_cap_mb_list=[...]) line that rebuilds "
                      "the plan's buckets in stock torch >= 2.14, and with -o write the caps "
                      "JSON (exact and paste caps, bucket bytes); a plan DDP cannot run is "
                      "refused naming the property (docs/ddp-caps.md)")
    plan.add_argument("-o", "--output", type=output_file, default=None,
                      help="plan JSON (or, with --emit ddp, caps JSON) to write; required "
                      "unless --emit ddp")
    plan.set_defaults(func=_plan)

    rep = sub.add_parser("replay", help="plan and replay algorithms; one result row each")
    _common(rep)
    rep.add_argument("--algorithms", default=None,
                     help=f"comma-separated names, or 'all' ({', '.join(ALGORITHMS_ALL)}; "
                     "the default: with --host, those the host-aware replay can run); "
                     f"known: {', '.join(planner_names())}")
    rep.add_argument("-o", "--output", required=True, type=output_file, help="results CSV to write")
    rep.add_argument("--timeline", type=output_folder, default=None, metavar="DIR",
                     help="write <algorithm>.trace.json (Perfetto) and .timeline.csv here")
    rep.add_argument("--plans", type=output_folder, default=None, metavar="DIR",
                     help="write each algorithm's plan JSON here")
    rep.add_argument("--replay-iters", type=integer(2, MAX_REPLAY_ITERATIONS), default=None,
                     help=f"iterations simulated (>= 2; default {DEFAULT_ITERATIONS})")
    rep.add_argument("--channels", type=integer(1, MAX_CHANNELS), default=1,
                     help="concurrent communication channels sharing bandwidth")
    rep.add_argument("--pack-s-per-byte", type=real(0.0, MAX_PACK_S_PER_BYTE), default=0.0,
                     help="pack/unpack cost of multi-tensor buckets, seconds per byte")
    rep.add_argument("--compute-slowdown", type=real(1.0, MAX_SLOWDOWN), default=1.0,
                     help="interference: backward compute speed divisor while a collective "
                     "runs (calibrated by the re-execution experiment; 1 = none)")
    rep.add_argument("--comm-slowdown", type=real(1.0, MAX_SLOWDOWN), default=1.0,
                     help="interference: collective speed divisor while backward computes")
    rep.add_argument("--collective-cpu-s", type=seconds, default=0.0,
                     help="interference: compute time each collective started during "
                     "backward costs it, seconds (0 = none)")
    rep.add_argument("--issue", choices=["dynamic", "executor"], default="dynamic",
                     help="issue order: dynamic (the algorithms as designed) or executor "
                     "(the one fixed sequence gradsched's executor issues)")
    rep.add_argument("--interference", type=Path, default=None, metavar="JSON",
                     help="take the three interference parameters from this JSON "
                     "(gradsched reexec interference); overrides the three options")
    rep.add_argument("--host", action="store_true",
                     help="host-aware replay: a launching thread and the device stream with "
                     "a bounded launch queue (gradsched.replay.host); needs a trace with "
                     "host columns (gradsched import kineto --host)")
    rep.add_argument("--launch-queue", type=integer(1, 1 << 24), default=None,
                     help="with --host: launches the host may have pending (default "
                     f"{DEFAULT_LAUNCH_QUEUE})")
    rep.add_argument("--collective-launch-s", type=seconds, default=None,
                     help="with --host: host time to issue one collective at the hook, s "
                     "(default 0)")
    add_stragglers(rep)
    rep.set_defaults(func=_replay)


def _comm_model(args: argparse.Namespace) -> CommModel:
    """The ``--comm`` model, the ``--topology``'s collective model or the ``--ps``
    parameter-server model (exactly one)."""
    given = [a for a in ("comm", "topology", "ps") if getattr(args, a, None) is not None]
    if len(given) != 1:
        raise ConfigError("give exactly one of --comm, --topology and --ps")
    if args.topology is None and args.topology_collective is not None:
        raise ConfigError("--topology-collective needs --topology (it picks the collective "
                          "model of a two-level cluster)")
    if getattr(args, "ps", None) is not None:
        return PSModel(load_ps(args.ps, args.world_size))
    if args.topology is None:
        return load_comm_spec(args.comm)
    return load_topology(args.topology).collective_model(
        args.topology_collective or "hierarchical")


def _comm_source(args: argparse.Namespace) -> str:
    """The ``--comm``, ``--topology`` or ``--ps`` the model came from."""
    return next((str(getattr(args, a)) for a in ("comm", "topology", "ps")
                 if getattr(args, a, None) is not None), "")


def warn_domain(args: argparse.Namespace, model: CommModel, world_size: int,
                parts: list[tuple[str, RangeShares | None]],
                collectives: tuple[str, ...]) -> None:
    """Print the domain notes of the predictions ``parts`` (what, out-of-range shares)
    and of the model at ``world_size`` to stderr, once each
    (:func:`gradsched.costmodel.domain_notes.domain_notes`)."""
    print_notes(args.command, domain_notes(model, world_size, _comm_source(args), parts,
                                           collectives))


def _world_size(args: argparse.Namespace, trace: ComputeTrace, model: CommModel) -> int:
    """The world size (held by the comm model); a compute trace captured in a job of
    another size is replayed as asked (the pipeline scales traces so), with a warning."""
    world = resolve_world_size(model, args.world_size, _comm_source(args) or None)
    traced = trace.meta.get("world_size")
    if isinstance(traced, int) and traced > 1 and traced != world:
        print(f"gradsched {args.command}: warning: {meta_path(args.compute)}, field "
              f"'world_size': the compute trace was captured in a job of {traced} ranks, "
              f"replayed at {world} ranks", file=sys.stderr)
    return world


def _plan(args: argparse.Namespace) -> int:
    _check_plan_args(args)
    trace = with_forward(ComputeTrace.load(args.compute), args.forward_ratio)
    if args.source is not None:
        plan = Plan.load(args.source)
        try:
            plan.check_covers(trace.names)
        except InputError as exc:  # a plan for another trace: name the plan file
            if exc.path is not None:
                raise
            raise InputError(f"{exc.reason} (compute trace {args.compute})",
                             path=args.source, field=exc.field) from None
        return _emit_ddp(plan, trace, args)
    model = _comm_model(args)
    world = _world_size(args, trace, model)
    knob_args = parse_knob_args(args.knob)
    check_knobs_used(knob_args, [args.algorithm])
    knobs = knobs_for(args.algorithm, knob_args)
    knobs = {**knobs, **_plan_overlap(args, trace, knobs)}
    plan = make_plan(args.algorithm, trace, model, world, knobs, args.grad_accum)
    plan.check_covers(trace.names)
    warn_domain(args, model, world,
                [(args.algorithm, plan_range_shares(trace, plan, model, world))],
                tuple(sorted(plan_collectives(plan))))
    if args.emit == "ddp":
        return _emit_ddp(plan, trace, args)
    # printed first: the plan is committed after stdout took what was printed
    print(f"{args.algorithm}: {plan.n_buckets} buckets for {trace.n_tensors} tensors "
          f"-> {args.output}")
    plan.save(args.output)
    coarsened = plan.info.get("partition_coarsened")
    if coarsened:  # the budget of collectives made the planner use a larger partition
        print(f"gradsched {args.command}: note: partition of {coarsened['asked_params']} "
              f"parameters coarsened to {coarsened['used_params']}: {coarsened['why']}",
              file=sys.stderr)
    return 0


def _plan_overlap(args: argparse.Namespace, trace: ComputeTrace,
                  knobs: dict[str, str]) -> dict[str, float]:
    """The overlap slowdown as the ``compute_slowdown`` knob of a planner that scores by
    replay (``best``); a number for a planner that does not is refused (it would be
    ignored), ``auto`` applies nothing there."""
    if not replay_knobs(args.algorithm, {"compute_slowdown": 1.0}):
        if not isinstance(args.overlap_slowdown, str):
            raise ConfigError(f"--overlap-slowdown: planner {args.algorithm!r} does not score "
                              "its plan by replay and would ignore it (drop it)")
        return {}
    given = "--knob compute_slowdown" if "compute_slowdown" in knobs else None
    return with_overlap(args, trace.meta, args.command, {}, given=given)


def _check_plan_args(args: argparse.Namespace) -> None:
    """One of --algorithm and --from; --from converts (--emit ddp) and plans nothing."""
    if (args.algorithm is None) == (args.source is None):
        raise ConfigError("give exactly one of --algorithm (make a plan) and --from "
                          "(convert a plan JSON)")
    if args.output is None and args.emit != "ddp":
        raise ConfigError("--output is required (or --emit ddp to print the DDP caps)")
    if args.source is None:
        return
    if args.emit != "ddp":
        raise ConfigError(f"--from {args.source} converts a plan: give --emit ddp")
    given = [f"--{a}" for a in ("comm", "topology", "topology_collective", "ps", "knob",
                                "world_size", "forward_ratio")
             if getattr(args, a, None) not in (None, [])]
    if args.overlap_slowdown != "auto":
        given.append("--overlap_slowdown")
    if args.grad_accum != 1:
        given.append("--grad_accum")
    if given:
        raise ConfigError(f"{given[0].replace('_', '-')} plans; --from {args.source} "
                          "converts a plan written before (drop one of them)")


def _emit_ddp(plan: Plan, trace: ComputeTrace, args: argparse.Namespace) -> int:
    """Print the paste line; with ``-o`` write the caps JSON."""
    try:
        caps = ddp_caps(plan, trace)
    except InputError as exc:  # name the plan file when there is one
        if args.source is None:
            raise
        raise InputError(exc.reason, path=args.source, field=exc.field) from None
    print(caps.paste_line())
    if args.output is not None:  # printed first: committed after stdout took it
        print(f"{plan.algorithm}: {caps.n_buckets} caps for {trace.n_tensors} tensors "
              f"-> {args.output}")
        write_json_atomic(args.output, caps_json(plan, trace, caps))
    return 0


def caps_json(plan: Plan, trace: ComputeTrace, caps: DdpCaps) -> dict[str, object]:
    """The caps file: paste and exact caps (MiB), bucket and last-member bytes."""
    return {"format": CAPS_FORMAT, "format_version": 1, "algorithm": plan.algorithm,
            "trace": trace.stem, "n_tensors": trace.n_tensors,
            "bucket_cap_mb_list": list(caps.paste_mb),
            "bucket_cap_mb_list_exact": list(caps.exact_mb),
            "bucket_bytes": list(caps.bucket_bytes),
            "last_member_bytes": list(caps.last_member_bytes),
            "paste_line": caps.paste_line()}


def _check_host_options(args: argparse.Namespace, interference: dict[str, float]) -> None:
    """The host-aware replay's settings need --host; the settings of the event replay it
    does not model (one iteration, one channel, no interference, no accumulation) are
    refused with it."""
    host_only = [flag for flag, value in (("--launch-queue", args.launch_queue),
                                          ("--collective-launch-s", args.collective_launch_s))
                 if value is not None]
    if host_only and not args.host:
        raise ConfigError(f"{host_only[0]} is a setting of the host-aware replay: give --host "
                          "(or drop it)")
    if not args.host:
        return
    not_modelled = [flag for flag, given in (
        ("--replay-iters", args.replay_iters is not None), ("--channels", args.channels != 1),
        ("--grad-accum", args.grad_accum != 1),
        ("--interference", args.interference is not None),
        *((f"--{k.replace('_', '-')}", v != NO_INTERFERENCE[k])
          for k, v in interference.items())) if given]
    if not_modelled:
        raise ConfigError(f"{not_modelled[0]} is not modelled by the host-aware replay (--host: "
                          "one iteration, one channel, no interference, no accumulation); "
                          "drop one of them")


def _host_default(command: str, case: tuple[ComputeTrace, CommModel, int],
                  algorithms: list[str], knobs: Any, options: ReplayOptions,
                  folders: CaseOutputs, made: dict[str, Plan]
                  ) -> pd.DataFrame:
    """``replay --host`` without ``--algorithms``: every default algorithm whose plan the
    host-aware replay can run (one channel, hook order, no credit); the others are left
    out and named on stderr. Refused only when none is left (a ``--timeline``, which the
    host-aware replay does not write, is refused by the first)."""
    frames, left_out = [], []
    for algorithm in algorithms:
        try:
            frames.append(compare(*case, [algorithm], knobs, options, folders, made))
        except HostReplayUnsupported:
            left_out.append(algorithm)
    if not frames:
        raise ConfigError("--host: the host-aware replay can run none of the default "
                          f"algorithms ({', '.join(left_out)}); name some with --algorithms")
    if left_out:
        print(f"gradsched {command}: note: --host left out {', '.join(left_out)} (plans "
              "the host-aware replay cannot run: it models DDP's family issuing collectives "
              "in hook order on one channel, without a credit); name algorithms with "
              "--algorithms to choose", file=sys.stderr)
    return pd.concat(frames, ignore_index=True)


def _replay(args: argparse.Namespace) -> int:
    trace = with_forward(ComputeTrace.load(args.compute), args.forward_ratio)
    model = _comm_model(args)
    world = _world_size(args, trace, model)
    trace = with_stragglers(args, trace, world)
    print_at_scale_note(args, trace, world, args.command)
    algorithms = expand_algorithms(args.algorithms or "all")
    knobs = parse_knob_args(args.knob)
    check_knobs_used(knobs, algorithms)
    interference = {"compute_slowdown": args.compute_slowdown,
                    "comm_slowdown": args.comm_slowdown,
                    "collective_cpu_s": args.collective_cpu_s}
    if args.interference is not None:
        given = [f"--{k.replace('_', '-')}" for k, v in interference.items()
                 if v != NO_INTERFERENCE[k]]
        if given:  # the file would silently override them
            raise ConfigError(f"give {given[0]} or --interference, not both (the JSON sets "
                              "all three interference parameters)")
        interference = load_interference(args.interference)[0]
    given = ("--interference" if args.interference is not None else
             "--compute-slowdown" if args.compute_slowdown != 1.0 else None)
    interference = with_overlap(args, trace.meta, args.command, dict(interference),
                                given=given, host=args.host)
    _check_host_options(args, interference)
    options = ReplayOptions(iterations=args.replay_iters or DEFAULT_ITERATIONS,
                            channels=args.channels,
                            pack_s_per_byte=args.pack_s_per_byte, issue=args.issue,
                            grad_accum=args.grad_accum, host=args.host,
                            launch_queue=DEFAULT_LAUNCH_QUEUE if args.launch_queue is None
                            else args.launch_queue,
                            collective_launch_s=args.collective_launch_s or 0.0,
                            **interference)
    with Staging() as stage:  # the results CSV, timelines and plans: all or none
        output = stage.file(args.output)
        timeline = stage.folder(args.timeline) if args.timeline is not None else None
        plans = stage.folder(args.plans) if args.plans is not None else None
        made: dict[str, Plan] = {}
        if args.host and args.algorithms is None:  # the default set: what --host can run
            results = _host_default(args.command, (trace, model, world), algorithms, knobs,
                                    options, CaseOutputs(timeline, plans), made)
        else:
            results = compare(trace, model, world, algorithms, knobs, options,
                              CaseOutputs(timeline, plans), made)
        write_csv_atomic(output, results)
        # printed inside the block: the outputs are committed after stdout took it all
        warn_domain(args, model, world,
                    [(str(row["algorithm"]), row_shares(row)) for _, row in results.iterrows()],
                    tuple(sorted({c for p in made.values() for c in plan_collectives(p)})))
        tied = results.iloc[tied_min(results["iteration_s"])]  # ties: every one, in run order
        print(results[["algorithm", "iteration_s", "exposed_comm_s", "n_collectives",
                       "gap_to_lb_pct"]].to_string(index=False,
                                                   float_format=lambda v: f"{v:.6g}"))
        print(f"fastest: {' = '.join(tied['algorithm'])} ({tied['iteration_s'].iloc[0]:.6g} "
              f"s); lower bound {results['lower_bound_s'].iloc[0]:.6g} s -> {args.output}")
    return 0
