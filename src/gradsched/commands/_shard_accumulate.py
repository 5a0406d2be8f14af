"""``gradsched shard accumulate``: FSDP2's and HSDP's gradient-accumulation modes side by
side.

    gradsched shard accumulate --compute TRACE.csv --comm SWEEP.csv --world-size 4 \\
        --grad-accum 4 [--mesh 2x2] [--algorithm fsdp2 | --plan plan.json] \\
        [--semantics blocking] [--memory-cap 600M] [-o OUT.csv]

Per mode (:mod:`gradsched.experiments.sharded.accumulation`): the step time, all-gathers,
reduce-scatters and all-reduces per step (by group size in the CSV), the peak of gathered
parameters and unsharded gradients, and the fastest mode within ``--memory-cap``.
``--mesh RxS``: HSDP's mesh, ``R`` replicas of shard groups of ``S`` ranks (the order of
``init_device_mesh``'s ``(replicate, shard)`` and of a plan's ``mesh``); its groups are
priced on a two-level cluster when ``--comm`` is an nccl model (its GPUs per node,
:class:`~gradsched.costmodel.mesh.NCCLPricer`), else every group by the flat model at its
size on one node (:class:`~gradsched.costmodel.mesh_one_node.OneNodePricer`).
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
    p.add_argument("--mesh", type=mesh_shape, default=None, metavar="RxS",
                   help="HSDP: R replicas of shard groups of S ranks (R x S = --world-size; "
                        "init_device_mesh's (replicate, shard)): adds the no-all-reduce mode "
                        "and prices the all-reduces among replicas")
    p.add_argument("-o", "--output", type=output_file, default=None, help="table CSV")
    p.set_defaults(func=_accumulate)


def mesh_shape(text: str):
    """``RxS`` (e.g. ``2x2``) as a :class:`~gradsched.plan_mesh.DeviceMeshShape`."""
    from gradsched.errors import ConfigError
    from gradsched.plan_mesh import DeviceMeshShape

    parts = text.lower().replace(" ", "").split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected RxS (replicate x shard ranks, e.g. 2x2), "
                                         f"got {text!r}")
    try:
        return DeviceMeshShape(int(parts[0]), int(parts[1]))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _on_mesh(args: argparse.Namespace, plan, model):
    """The plan on ``--mesh`` (or its own), and the cluster its groups are priced on
    (None without replicas)."""
    from dataclasses import replace

    from gradsched.costmodel.mesh import NCCLPricer
    from gradsched.costmodel.mesh_one_node import OneNodePricer
    from gradsched.costmodel.nccl.model import NCCLModel
    from gradsched.errors import ConfigError

    mesh = args.mesh
    if mesh is not None:
        if mesh.world_size != args.world_size:
            raise ConfigError(f"--mesh {mesh.replicate}x{mesh.shard} is {mesh.world_size} "
                              f"ranks, but --world-size is {args.world_size}")
        if plan.mesh is not None and plan.mesh != mesh:
            raise ConfigError(f"--mesh {mesh.replicate}x{mesh.shard} differs from the plan's "
                              f"mesh {plan.mesh.replicate}x{plan.mesh.shard}")
        plan = replace(plan, mesh=mesh)
    if plan.mesh is None or not plan.mesh.is_hsdp:
        return plan, None
    if isinstance(model, NCCLModel):
        per_node = model.hardware.gpus_per_node
        if args.world_size % per_node:
            raise ConfigError(f"--world-size {args.world_size} is not a whole number of "
                              f"{per_node}-GPU nodes ({args.comm})")
        return plan, NCCLPricer(model, args.world_size // per_node)
    return plan, OneNodePricer(model, args.world_size, str(args.comm))


def _accumulate(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.margin import model_margin
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
    plan, pricer = _on_mesh(args, plan, model)
    rows = accumulation_rows(problem, plan, pricer)
    frame = pd.DataFrame(rows)
    frame.insert(0, "network", case_name(args.comm))
    frame.insert(0, "case", case_name(args.compute))
    hsdp = pricer is not None
    shown = ["mode", "step_s", "all_gathers", "reduce_scatters",
             *(["all_reduces", "partial_grad_bytes"] if hsdp else []), "gathered_peak_bytes",
             "extra_peak_bytes", "step_over_fastest", *(["fits_cap"] if args.memory_cap
                                                        is not None else [])]
    where = (f"{plan.mesh.label()} on {pricer.describe()}" if hsdp
             else f"{args.world_size} ranks")
    print(f"{plan.algorithm}: {plan.n_units} units, {args.grad_accum} micro-batches per step, "
          f"{where}, {args.semantics}")
    print(frame[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if hsdp:
        print("collectives per step by kind@group ranks:")
        for r in rows:
            print(f"  {r['mode']}: {r['collectives']}")
    else:
        print(f"not priced: {NOT_PRICED}")
    kinds = ("all_gather", "reduce_scatter", *(("all_reduce",) if hsdp else ()))
    groups = (plan.mesh.shard, plan.mesh.replicate) if hsdp else (args.world_size,)
    if hsdp:
        print(f"groups priced: {pricer.domain(tuple(sorted(set(groups))))}")
    margin = model_margin(model, args.comm, kinds, world_size=max(groups))
    print(f"margin: {margin.pct:.3g} % ({margin.source})")
    print(advice(rows, margin.pct))
    if args.output is not None:
        write_csv_atomic(args.output, frame)
    return 0
