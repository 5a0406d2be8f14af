"""``gradsched shard compare|plan|run``: sharded data parallelism (FSDP2 / ZeRO-3 units).

    gradsched shard compare --compute TRACE.csv --comm SWEEP.csv --world-size 2 \\
        [--semantics streams|blocking] [--memory-cap 600M] [--plans-dir DIR] [-o OUT.csv]
    gradsched shard plan --compute TRACE.csv --comm SWEEP.csv --world-size 2 \\
        --algorithm fsdp2|fsdp2-noreshard|fsdp2-saturation|fsdp2-cap|torchtitan|sharded-optimum \\
        [--knob k=v] [--memory-cap 600M] [--grad-accum K [--keep-unsharded-between-microbatches]] \\
        [--param-dtype bf16] [--reduce-dtype fp32] [--float8-all-gather] -o plan.json
    gradsched shard run --model resnet18 --batch-size 4 --world-size 2 \\
        --plan a.json --plan b.json [--cluster tbf1gbit] [--rounds 3] [--iters 5] \\
        [--grad-accum K] -o OUT.csv
    gradsched shard measure --model resnet18 --batch-size 4 --world-size 2 \\
        --network tbf1gbit [--algorithms fsdp2,fsdp2-noreshard,sharded-optimum-capped] \\
        [--rounds 3] -o DIR

``mesh`` (:mod:`gradsched.commands._shard_mesh`) compares full sharding, resharding to a
node after forward and HSDP on a two-level cluster.

``measure`` is the re-execution protocol for sharded plans
(:mod:`gradsched.reexec.sharded`): plans from the committed CPU trace and gloo sweep of the
case, predicted, run with stock FSDP2, measured against predicted and against FSDP2's
defaults (and FSDP2's units without resharding) with bootstrap intervals, with each plan's
predicted and measured peak memory; ``sharded-optimum-capped`` is the optimum under a cap
of FSDP2's default predicted peak. ``compare`` replays every sharded planner and the exact optimum
(:mod:`gradsched.experiments.sharded.optimum`) against the lower bound; ``plan`` writes one plan
and prints the ``fully_shard`` layout; ``run`` runs plans with stock FSDP2 on gloo
(:mod:`gradsched.runtime.fsdp2`), rounds interleaved in random order.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._admit import Training, admit_training
from gradsched.commands._args import (
    add_grad_accum,
    add_oversubscribe,
    integer,
    positive_seconds,
    size,
)
from gradsched.commands._dtypes import add_dtype_options, dtypes_of
from gradsched.commands._outputs import output_file, output_folder
from gradsched.commands._overlap import add_overlap_option, sharded_overlap
from gradsched.commands._shard_mesh import register_mesh
from gradsched.limits import MAX_RANKS

MEASURED_DEFAULT = ("fsdp2,fsdp2-noreshard,fsdp2-saturation,sharded-optimum,"
                    "sharded-optimum-capped")
SEMANTICS_HELP = ("streams: collectives on their own streams (GPU, NCCL); blocking: the host "
                  "waits for each collective (FSDP2 on CPU with gloo)")


def _common(p: argparse.ArgumentParser) -> None:
    from gradsched.commands._stragglers import add_stragglers

    add_stragglers(p)
    p.add_argument("--compute", required=True, help="compute trace CSV")
    p.add_argument("--comm", required=True,
                   help="comm sweep CSV, fitted model JSON or inline alpha-beta, as for replay")
    p.add_argument("--world-size", type=integer(1, MAX_RANKS), required=True)
    p.add_argument("--semantics", choices=("streams", "blocking"), default="streams",
                   help=SEMANTICS_HELP)
    p.add_argument("--memory-cap", type=size(), default=None,
                   help="cap on the gathered parameters and gradients in flight per rank "
                        "(bytes, e.g. 600M), for the optimum")
    p.add_argument("--gpu-memory", type=size(), default=None,
                   help="memory of one GPU (e.g. 80G): the optimum gathers no more than it "
                        "leaves after the parameter, gradient and Adam-state shards; default: "
                        "the trace's device when it names a known GPU")
    add_grad_accum(p, "every micro-batch all-gathers, the last reduce-scatters (FSDP2 "
                   "set_requires_gradient_sync(False) on the others); planned and replayed "
                   "per step")
    p.add_argument("--keep-unsharded-between-microbatches", action="store_true",
                   help="with --grad-accum: the plans also call FSDP2's "
                        "set_reshard_after_backward(False) on every micro-batch but the last, "
                        "so the parameters stay gathered between micro-batches (only the "
                        "first all-gathers in forward; more memory); the plan JSON records it")
    add_overlap_option(p)
    add_dtype_options(p)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("shard", help="sharded data parallelism: FSDP2 units and prefetch")
    ssub = parser.add_subparsers(dest="shard_command", required=True)
    register_mesh(ssub)  # gradsched shard mesh: FSDP vs HSDP vs integer resharding

    p = ssub.add_parser("compare", help="replay every sharded planner and the optimum")
    _common(p)
    p.add_argument("--plans-dir", type=output_folder, default=None,
                   help="write each planner's plan JSON here")
    p.add_argument("-o", "--output", type=output_file, default=None, help="table CSV")
    p.set_defaults(func=_compare)

    p = ssub.add_parser("plan", help="one sharded plan, and its fully_shard layout")
    _common(p)
    p.add_argument("--algorithm", required=True,
                   help="fsdp2, fsdp2-noreshard, fsdp2-saturation, fsdp2-cap, zero3, "
                        "torchtitan, torchtitan-2024 or sharded-optimum")
    p.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                   help="planner knob (e.g. unit_mb=50, forward_prefetch=2)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="plan JSON")
    p.set_defaults(func=_plan)

    p = ssub.add_parser("run", help="run sharded plans with stock FSDP2 (gloo)")
    p.add_argument("--model", required=True, help="zoo model (gradsched capture --help)")
    p.add_argument("--batch-size", type=integer(1, 1 << 20), required=True)
    p.add_argument("--seq-len", type=integer(1, 1 << 20), default=None)
    p.add_argument("--world-size", type=integer(2, MAX_RANKS), required=True)
    p.add_argument("--plan", action="append", required=True, help="sharded plan JSON")
    add_grad_accum(p, "a timed iteration is one optimizer step: FSDP2 "
                   "set_requires_gradient_sync(False) on the first K-1 micro-batches (and "
                   "set_reshard_after_backward(False) for a plan that keeps its parameters "
                   "unsharded between micro-batches), each loss divided by K; the CSV then "
                   "carries a grad_accum column")
    p.add_argument("--cluster", default=None,
                   help="emulated cluster network (e.g. tbf1gbit; needs root); none: loopback")
    p.add_argument("--rounds", type=integer(1, 100), default=3)
    p.add_argument("--iters", type=integer(1, 10_000), default=5)
    p.add_argument("--warmup", type=integer(1, 10_000), default=1)
    p.add_argument("--timeout-s", type=positive_seconds, default=300.0,
                   help="limit on every collective wait (default 300)")
    add_oversubscribe(p)
    p.add_argument("-o", "--output", type=output_file, default=None,
                   help="CSV: one row per plan and timed iteration")
    p.set_defaults(func=_run)

    p = ssub.add_parser("measure", help="sharded plans measured against their prediction "
                        "and against FSDP2's defaults (stock FSDP2, gloo)")
    p.add_argument("--model", required=True, help="zoo model")
    p.add_argument("--batch-size", type=integer(1, 1 << 20), required=True)
    p.add_argument("--world-size", type=integer(2, MAX_RANKS), required=True)
    p.add_argument("--network", required=True,
                   help="loopback, or an emulated-cluster network (tbf1gbit, tbf100mbit; root)")
    p.add_argument("--compute", default=None, help="compute trace (default: "
                   "traces/compute/cpu/<model>-b<batch>-cpu-fp32.csv)")
    p.add_argument("--comm", default=None, help="comm sweep (default: "
                   "traces/comm/cpu/gloo-<network>-p<P>.csv)")
    p.add_argument("--algorithms", default=MEASURED_DEFAULT,
                   help="comma-separated sharded planners, sharded-optimum and "
                        "sharded-optimum-capped (the optimum under a cap of fsdp2's predicted "
                        "peak); fsdp2 is the baseline")
    p.add_argument("--memory-cap", type=size(), default=None,
                   help="cap for sharded-optimum (bytes); default none")
    p.add_argument("--rounds", type=integer(1, 100), default=3)
    p.add_argument("--iters", type=integer(1, 10_000), default=3)
    p.add_argument("--warmup", type=integer(1, 10_000), default=1)
    p.add_argument("--timeout-s", type=positive_seconds, default=600.0,
                   help="limit on every collective wait (default 600)")
    add_oversubscribe(p)
    p.add_argument("-o", "--output", type=output_folder, required=True,
                   help="folder: measured.csv, iterations.csv, meta.json, plans/")
    p.set_defaults(func=_measure)
    register_dtypes(ssub)
    from gradsched.commands._shard_accumulate import add_accumulate
    from gradsched.commands._shard_rival import add_rival

    add_accumulate(ssub)
    add_rival(ssub)


def _check_keep(args: argparse.Namespace) -> None:
    """``--keep-unsharded-between-microbatches`` acts between micro-batches: with one per
    step there is none to keep parameters across, so it is refused, not dropped."""
    from gradsched.errors import ConfigError

    if args.keep_unsharded_between_microbatches and args.grad_accum == 1:
        raise ConfigError("--keep-unsharded-between-microbatches needs --grad-accum K > 1 "
                          "(with one micro-batch per step there is nothing to keep the "
                          "parameters gathered between)")


def _inputs(args: argparse.Namespace):
    from gradsched.commands._at_scale_note import print_at_scale_note
    from gradsched.commands._stragglers import with_stragglers
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.traces.bundle import ComputeTrace

    trace = with_stragglers(args, ComputeTrace.load(args.compute), args.world_size)
    print_at_scale_note(args, trace, args.world_size, f"shard {args.shard_command}")
    dtypes_of(args, trace)  # refused before any work when the trace cannot say
    return trace, load_comm_spec(args.comm)


def _compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.experiments.sharded.optimum import compare
    from gradsched.io import write_csv_atomic

    _check_keep(args)
    trace, model = _inputs(args)
    slowdown = sharded_overlap(args, trace.meta, "shard compare", args.semantics)
    plans: dict = {}
    rows = compare(_problem(args, trace, model, slowdown), plans=plans)
    _print_domain(args, trace, model, list(plans.items()))
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.output is not None:
        write_csv_atomic(args.output, frame)
    if args.plans_dir is not None:
        _write_plans(args, trace, model, [str(r["algorithm"]) for r in rows], slowdown)
    return 0


LAYOUT_LABELS = {"fsdp2": "FSDP2 default", "sharded-optimum": "optimum"}
"""The names ``advise --sharded`` gives these layouts in its notes."""


def _print_domain(args: argparse.Namespace, trace, model, plans: list) -> None:
    """The domain notes of the layouts on stderr, as ``advise --sharded`` words them
    (:func:`gradsched.experiments.recommend_sharded.sharded_notes`)."""
    from gradsched.costmodel.domain_notes import print_notes
    from gradsched.experiments.recommend_sharded import sharded_notes

    layouts = [(LAYOUT_LABELS.get(name, name), plan) for name, plan in plans]
    print_notes(f"shard {args.shard_command}",
                sharded_notes(trace, model, args.world_size, str(args.comm), layouts))


def _one_plan(args: argparse.Namespace, trace, model, name: str, knobs=None,
              slowdown: float = 1.0):
    from dataclasses import replace

    from gradsched.experiments.sharded.optimum import OPTIMUM, optimum
    from gradsched.planners.sharded import make_sharded_plan

    keep = args.keep_unsharded_between_microbatches
    if name == OPTIMUM:
        if knobs:
            raise SystemExit(f"gradsched: {OPTIMUM} takes --memory-cap, --gpu-memory and "
                             "--semantics, no knobs")
        return optimum(_problem(args, trace, model, slowdown)).plan
    return replace(make_sharded_plan(name, trace, model, args.world_size, knobs),
                   keep_unsharded_between_microbatches=keep, mixed_precision=dtypes_of(args))


def _problem(args: argparse.Namespace, trace, model, slowdown: float):
    """The sharded problem the options describe, made and checked once
    (:class:`gradsched.experiments.sharded.common.ShardedProblem`); its cap from
    :func:`_optimum_cap` (said on stdout)."""
    from gradsched.experiments.sharded.common import ShardedProblem

    return ShardedProblem(trace, model, args.world_size, semantics=args.semantics,
                          memory_cap_bytes=_optimum_cap(args, trace),
                          grad_accum=args.grad_accum,
                          keep_unsharded=args.keep_unsharded_between_microbatches,
                          compute_slowdown=slowdown, mixed_precision=dtypes_of(args))


def _optimum_cap(args: argparse.Namespace, trace) -> float | None:
    """The optimum's cap: ``--memory-cap`` and what the GPU's memory leaves, the smaller
    (:func:`gradsched.experiments.sharded.memory.memory_budget`); said on stdout."""
    from gradsched.experiments.sharded.memory import memory_budget

    budget = memory_budget(trace, args.world_size, args.gpu_memory)
    if budget is None:
        return args.memory_cap
    print(f"memory: {budget.text()}")
    cap = budget.gathered_cap_bytes
    return cap if args.memory_cap is None else min(cap, args.memory_cap)


def _write_plans(args: argparse.Namespace, trace, model, names: list[str],
                 slowdown: float) -> None:
    from gradsched.staging import Staging

    with Staging() as staging:
        folder = staging.folder(Path(args.plans_dir))
        for name in names:
            _one_plan(args, trace, model, name, slowdown=slowdown).save(
                folder / f"{name}.json")


def _plan(args: argparse.Namespace) -> int:
    from gradsched.errors import ConfigError
    from gradsched.experiments.sharded.optimum import OPTIMUM
    from gradsched.plan_sharded import fully_shard_code
    from gradsched.replay.sharded import replay_sharded

    _check_keep(args)
    if args.algorithm != OPTIMUM:  # the other planners take knobs, not a memory budget
        for flag, given in (("--memory-cap", args.memory_cap),
                            ("--gpu-memory", args.gpu_memory)):
            if given is not None:
                raise ConfigError(f"{flag} bounds {OPTIMUM}'s search; planner "
                                  f"{args.algorithm!r} does not read it (drop it)")
    trace, model = _inputs(args)
    knobs = {}
    for item in args.knob:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--knob {item!r}: expected NAME=VALUE")
        knobs[key.strip()] = value.strip()
    if args.algorithm != OPTIMUM or knobs:  # no slowdown in its search: knobs refused
        plan = _one_plan(args, trace, model, args.algorithm, knobs)  # before any note
        slowdown = sharded_overlap(args, trace.meta, "shard plan", args.semantics)
    else:
        slowdown = sharded_overlap(args, trace.meta, "shard plan", args.semantics)
        plan = _one_plan(args, trace, model, args.algorithm, knobs, slowdown)
    result = replay_sharded(trace, plan, model, args.world_size, semantics=args.semantics,
                            grad_accum=args.grad_accum, compute_slowdown=slowdown)
    _print_domain(args, trace, model, [(plan.algorithm, plan)])
    plan.save(args.output)
    print(f"{plan.algorithm}: {plan.n_units} units (+ root), forward prefetch "
          f"{plan.forward_prefetch}, backward prefetch {plan.backward_prefetch}; predicted "
          f"{result.iteration_s:.4g} s per {_step(args)}, peak of gathered parameters and "
          "gradients "
          f"{result.gathered_peak_bytes / 2**20:.4g} MiB -> {args.output}")
    print(fully_shard_code(plan, trace.names))
    if plan.info.get("exact") is False:
        print(f"note: {plan.info['method']}: within {plan.info['gap_to_bound_pct']:.3g} % of "
              "the lower bound, not proven optimal")
    return 0


def _step(args: argparse.Namespace) -> str:
    return "iteration" if args.grad_accum == 1 else \
        f"optimizer step of {args.grad_accum} micro-batches"


def _run(args: argparse.Namespace) -> int:
    import statistics

    import pandas as pd

    from gradsched.distributed import DistributedError
    from gradsched.io import write_csv_atomic
    from gradsched.plan_sharded import ShardedPlan
    from gradsched.reexec.sharded import run_plans
    from gradsched.runtime.prelaunch import check_plans
    from gradsched.runtime.rounds import Launch, Timing
    from gradsched.workloads.zoo import check_seq_len

    check_seq_len(args.model, args.seq_len)
    plans = [ShardedPlan.load(p) for p in args.plan]
    check_plans(list(zip(map(str, args.plan), plans, strict=True)), model=args.model,
                batch_size=args.batch_size, seq_len=args.seq_len)  # before any rank starts
    admit_training("shard run", Training(model=args.model, batch_size=args.batch_size,
                                         seq_len=args.seq_len),
                   ranks=args.world_size, oversubscribe=args.oversubscribe)
    pooled, groups = run_plans(plans, Timing(model=args.model, batch_size=args.batch_size,
                                             rounds=args.rounds, warmup=args.warmup,
                                             iters=args.iters, seq_len=args.seq_len,
                                             timeout_s=args.timeout_s,
                                             grad_accum=args.grad_accum),
                               Launch(world_size=args.world_size, cluster=args.cluster))
    rows = []
    for path, plan, times, grouped in zip(args.plan, plans, pooled, groups, strict=True):
        expected = [sorted(u.tensors) for u in plan.units]
        if grouped != expected:
            raise DistributedError(f"{path}: FSDP2 grouped the parameters differently from the "
                                   "plan's units")
        steps = "" if args.grad_accum == 1 else f" (optimizer steps of {args.grad_accum} " \
            "micro-batches)"
        print(f"{plan.algorithm} ({path}): median {statistics.median(times):.4g} s over "
              f"{len(times)} iterations{steps}")
        rows += [{"plan": str(path), "algorithm": plan.algorithm, "iteration": i,
                  "iteration_s": t} | ({} if args.grad_accum == 1
                                       else {"grad_accum": args.grad_accum})
                 for i, t in enumerate(times)]
    if args.output is not None:
        write_csv_atomic(args.output, pd.DataFrame(rows))
    return 0


def _measure(args: argparse.Namespace) -> int:
    import datetime as dt
    import shlex
    import sys

    import pandas as pd

    from gradsched.costmodel.base import load_comm_spec
    from gradsched.io import write_csv_atomic, write_json_atomic
    from gradsched.networks import tc_rate
    from gradsched.provenance import load_average, machine_info, software_versions
    from gradsched.reexec.sharded import ShardedCase, measure
    from gradsched.runtime.rounds import Timing
    from gradsched.staging import Staging
    from gradsched.traces.bundle import ComputeTrace

    compute = args.compute or f"traces/compute/cpu/{args.model}-b{args.batch_size}-cpu-fp32.csv"
    comm = args.comm or f"traces/comm/cpu/gloo-{args.network}-p{args.world_size}.csv"
    trace = ComputeTrace.load(compute)
    model = load_comm_spec(comm)
    case = ShardedCase(args.model, args.batch_size, args.world_size, args.network,
                       tc_rate(args.network))
    admit_training("shard measure", Training(model=args.model, batch_size=args.batch_size),
                   ranks=args.world_size, oversubscribe=args.oversubscribe)
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    started = dt.datetime.now(dt.UTC)
    load_before = load_average()
    timing = Timing(model=case.model, batch_size=case.batch_size, rounds=args.rounds,
                    warmup=args.warmup, iters=args.iters, seq_len=case.seq_len,
                    timeout_s=args.timeout_s, memory=True)
    rows, iterations, plans = measure(case, trace, model, algorithms, timing,
                                      memory_cap_bytes=args.memory_cap, source=str(compute))
    meta = {"kind": "sharded-reexec", "command": shlex.join(["gradsched", *sys.argv[1:]]),
            "compute": compute, "comm": comm, "started_utc": started.isoformat(),
            "ended_utc": dt.datetime.now(dt.UTC).isoformat(),
            "load_average_before": load_before, "load_average_after": load_average(),
            "rounds": args.rounds, "iters": args.iters, "warmup": args.warmup,
            "threads_per_rank": 1, "backend": "gloo", "semantics": "blocking",
            "prediction": "sharded replay (blocking) on the compute trace scaled to the "
                          "median of the compute-only control of the same launch "
                          "(compute_scale); predicted_raw_s: on the trace as committed",
            "memory_cap_bytes": args.memory_cap,
            "measured_peak": "one extra untimed iteration per run under torch.profiler "
                             "(profile_memory): peak of CPU tensor storage allocated during "
                             "the iteration and live at once, largest over ranks and rounds",
            "machine": machine_info("cpu"), "software": software_versions()}
    with Staging() as staging:
        folder = staging.folder(args.output)
        write_csv_atomic(folder / "measured.csv", pd.DataFrame(rows))
        write_csv_atomic(folder / "iterations.csv", pd.DataFrame(iterations))
        write_json_atomic(folder / "meta.json", meta)
        (folder / "plans").mkdir()
        for name, plan in zip(algorithms, plans, strict=True):
            plan.save(folder / "plans" / f"{name}.json")
    if rows:
        print(f"compute-only control: {rows[0]['compute_only_s']:.3g} s (the compute trace "
              f"scaled by {rows[0]['compute_scale']:.3g} before predicting), peak "
              f"{rows[0]['compute_only_peak_bytes'] / 2**20:.4g} MiB")
    for row in rows:
        print(f"{row['algorithm']}: measured {row['measured_s']:.3g} s "
              f"[p10 {row['measured_p10_s']:.3g}, p90 {row['measured_p90_s']:.3g}], predicted "
              f"{row['predicted_s']:.3g} s ({row['error_pct']:+.0f} %), vs fsdp2 "
              f"{row['speedup_vs_fsdp2']:.3f} [{row['speedup_low']:.3f}, "
              f"{row['speedup_high']:.3f}]; peak predicted "
              f"{row['predicted_peak_bytes'] / 2**20:.4g} MiB, measured "
              f"{row['measured_peak_bytes'] / 2**20:.4g} MiB")
    return 0


def register_dtypes(ssub: argparse._SubParsersAction) -> None:
    """``shard dtypes``: every mixed-precision policy with FSDP2's and torchtitan's layouts
    (:mod:`gradsched.experiments.sharded.dtypes_study`), streams semantics."""
    p = ssub.add_parser("dtypes", help="the collectives' dtypes (bf16, bf16/fp32, float8 "
                        "all-gather) with FSDP2's and torchtitan's layouts, replayed")
    p.add_argument("--compute", required=True, help="compute trace CSV (an LLM trace of "
                   "gradsched traces flops, for the float8 rows)")
    p.add_argument("--comm", required=True, help="comm sweep CSV, model JSON or alpha-beta")
    p.add_argument("--world-size", type=integer(2, MAX_RANKS), required=True)
    p.add_argument("--label", required=True, help="the case's name in the CSV")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV")
    p.set_defaults(func=_dtypes)


def _dtypes(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.sharded.common import ShardedProblem
    from gradsched.experiments.sharded.dtypes_study import dtype_study
    from gradsched.io import write_csv_atomic
    from gradsched.traces.bundle import ComputeTrace

    problem = ShardedProblem(ComputeTrace.load(args.compute), load_comm_spec(args.comm),
                             args.world_size)
    frame = pd.DataFrame(dtype_study(problem, args.label))
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    write_csv_atomic(args.output, frame)
    return 0
