"""``gradsched shard accumulate``: FSDP2's gradient-accumulation modes side by side.

    gradsched shard accumulate --compute TRACE.csv --comm SWEEP.csv --world-size 2 \\
        --grad-accum 4 [--algorithm fsdp2 | --plan plan.json] [--semantics blocking] \\
        [--memory-cap 600M] [-o OUT.csv]

Per mode (:mod:`gradsched.experiments.sharded.accumulation`): the step time, all-gathers and
reduce-scatters per step, the peak of gathered parameters and unsharded gradients, and the
fastest mode within ``--memory-cap``.
"""

from __future__ import annotations

import argparse

from gradsched.commands._args import add_grad_accum, add_sharded_case, size
from gradsched.commands._outputs import output_file


def add_accumulate(ssub: argparse._SubParsersAction) -> None:
    """Register ``shard accumulate``."""
    p = ssub.add_parser("accumulate", help="FSDP2's gradient-accumulation modes side by "
                        "side: step time, collectives and peak memory of each")
    add_sharded_case(p)
    add_grad_accum(p, "the modes differ in what the first K-1 micro-batches communicate "
                   "and keep")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--algorithm", default=None,
                       help="the sharded planner whose units are compared (default fsdp2); "
                            "sharded-optimum: the optimum for K micro-batches per step with "
                            "gradient sync skipped on all but the last (no cap)")
    which.add_argument("--plan", default=None, help="a sharded plan JSON instead")
    p.add_argument("--memory-cap", type=size(), default=None,
                   help="cap on the gathered parameters and unsharded gradients per rank "
                        "(bytes): the advice is the fastest mode within it")
    p.add_argument("-o", "--output", type=output_file, default=None, help="table CSV")
    p.set_defaults(func=_accumulate)


def _accumulate(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.recommend import model_margin
    from gradsched.experiments.sharded.accumulation import NOT_PRICED, accumulation_rows, advice
    from gradsched.experiments.sharded.common import ShardedProblem
    from gradsched.experiments.sharded.optimum import OPTIMUM, optimum
    from gradsched.experiments.sharded.rival import case_name
    from gradsched.io import write_csv_atomic
    from gradsched.plan_sharded import ShardedPlan
    from gradsched.planners.sharded import make_sharded_plan
    from gradsched.traces.bundle import ComputeTrace

    trace = ComputeTrace.load(args.compute)
    model = load_comm_spec(args.comm)
    problem = ShardedProblem(trace, model, args.world_size, semantics=args.semantics,
                             memory_cap_bytes=args.memory_cap, grad_accum=args.grad_accum)
    if args.plan is not None:
        plan = ShardedPlan.load(args.plan)
        plan.check_covers(trace.names, args.plan)
    elif args.algorithm == OPTIMUM:
        plan = optimum(ShardedProblem(trace, model, args.world_size, semantics=args.semantics,
                                      grad_accum=args.grad_accum)).plan
    else:
        plan = make_sharded_plan(args.algorithm or "fsdp2", trace, model, args.world_size)
    rows = accumulation_rows(problem, plan)
    frame = pd.DataFrame(rows)
    frame.insert(0, "network", case_name(args.comm))
    frame.insert(0, "case", case_name(args.compute))
    shown = ["mode", "step_s", "all_gathers", "reduce_scatters", "gathered_peak_bytes",
             "extra_peak_bytes", "step_over_fastest", *(["fits_cap"] if args.memory_cap
                                                        is not None else [])]
    print(f"{plan.algorithm}: {plan.n_units} units, {args.grad_accum} micro-batches per step, "
          f"{args.world_size} ranks, {args.semantics}")
    print(frame[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"not priced: {NOT_PRICED}")
    margin = model_margin(model, args.comm, ("all_gather", "reduce_scatter"),
                          world_size=args.world_size)
    print(f"margin: {margin.pct:.3g} % ({margin.source})")
    print(advice(rows, margin.pct))
    if args.output is not None:
        write_csv_atomic(args.output, frame)
    return 0
