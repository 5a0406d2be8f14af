"""``gradsched advise --sharded --mesh``: which data-parallel mesh to give FSDP2 (full
sharding, ``reshard_after_forward`` = GPUs per node, HSDP with shard groups of one or more
nodes; :mod:`gradsched.experiments.sharded.mesh`), with predicted time and memory per GPU,
and the ``init_device_mesh`` / ``fully_shard(mesh=...)`` code to paste.

The cluster comes from ``--topology FILE`` (its nodes and GPUs per node) or from an ``nccl``
``--comm`` model (its GPUs per node; the world size from ``--world-size``).
"""

from __future__ import annotations

import argparse

from gradsched.errors import ConfigError

MIB = 2**20
GIB = 2**30


def add_mesh_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--mesh", action="store_true",
                       help="with --sharded: compare device meshes (FSDP over every rank, "
                            "reshard_after_forward=GPUs per node, HSDP with shard groups of "
                            "1, 2, 4... nodes) on a two-level cluster (--topology FILE, or an "
                            "nccl --comm model) and print the recommended mesh's code")


def mesh_pricer(args: argparse.Namespace, model: object, world: int):
    """The cluster: the topology's, or the nccl comm model's nodes."""
    from gradsched.costmodel.mesh import NCCLPricer, TopologyPricer
    from gradsched.costmodel.nccl.model import NCCLModel
    from gradsched.costmodel.topology import load_topology

    if args.topology is not None:
        return TopologyPricer(load_topology(args.topology),
                              args.topology_collective or "hierarchical")
    if not isinstance(model, NCCLModel):
        raise ConfigError("--mesh needs a two-level cluster: --topology FILE, or an nccl "
                          "--comm model (gradsched fit --cross-world-size --hardware ...)")
    per_node = model.hardware.gpus_per_node
    if world % per_node:
        raise ConfigError(f"--mesh: world size {world} is not a whole number of "
                          f"{per_node}-GPU nodes")
    return NCCLPricer(model, world // per_node)


def mesh_code(plan, names: tuple[str, ...], device: str = "cuda") -> str:
    """The code to paste: :func:`gradsched.experiments.recommend_sharded.paste_code` (a loop
    over the blocks when uniform) with the mesh created first and passed to every
    ``fully_shard``; ``device``: the mesh's device type (``cpu`` for gloo)."""
    from gradsched.experiments.recommend_sharded import paste_code

    lines = []
    for line in paste_code(plan, names).splitlines():
        if "fully_shard(" in line and "mesh=" not in line and line.rstrip().endswith(")"):
            line = line.rstrip()[:-1] + ", mesh=mesh)"
        lines.append(line)
    if plan.mesh is not None and not any(line.startswith("mesh = ") for line in lines):
        lines.insert(0, plan.mesh.code(device))
    lines = [line.replace('init_device_mesh("cuda"', f'init_device_mesh("{device}"')
             for line in lines]
    return "\n".join(["from torch.distributed.device_mesh import init_device_mesh", *lines])


def run_mesh_advice(args: argparse.Namespace, trace: object, model: object,
                    world: int) -> int:
    """Print the comparison and the recommendation; ``--plan-out``/``--json`` as for
    ``advise --sharded``."""
    from gradsched.commands._overlap import sharded_overlap
    from gradsched.experiments.margin import model_margin
    from gradsched.experiments.sharded.memory import device_memory
    from gradsched.experiments.sharded.mesh import MeshCase, compare_meshes, recommended
    from gradsched.io import write_json_atomic

    for flag, given in (("--validate", args.validate), ("--memory-cap", args.memory_cap),
                        ("--caps", args.caps), ("--interference", args.interference),
                        ("--current-bucket-cap-mb", args.current_bucket_cap_mb),
                        ("--replay-iters", args.replay_iters), ("--backend", args.backend)):
        if given not in (None, False):
            raise ConfigError(f"{flag} is not read by --mesh (drop one of them)")
    device = str(trace.meta.get("device", ""))  # type: ignore[attr-defined]
    semantics = args.semantics or ("blocking" if device.startswith("cpu") else "streams")
    gpu = args.gpu_memory if args.gpu_memory is not None else device_memory(device)
    pricer = mesh_pricer(args, model, world)
    slowdown = sharded_overlap(args, trace.meta,  # type: ignore[attr-defined]
                               "advise --sharded --mesh", semantics)
    case = MeshCase(semantics=semantics, grad_accum=args.grad_accum,
                    compute_slowdown=slowdown, gpu_memory_bytes=gpu)
    results = compare_meshes(trace, pricer, case)  # type: ignore[arg-type]
    margin = model_margin(model, args.comm or str(args.topology),  # type: ignore[arg-type]
                          ("all_gather", "reduce_scatter", "all_reduce"), args.margin_pct,
                          world)
    best = recommended(results, gpu, margin.pct)
    print(f"gradsched advise --sharded --mesh: {world} ranks on {pricer.describe()}, "
          f"{semantics} collectives; FSDP2's per-block units on each mesh; predicted "
          "iteration time (replay) and memory per GPU (gathered peak + parameter, gradient "
          "and Adam shards over the shard group + activations):")
    for r in results:
        fits = "" if gpu is None or r.memory_bytes <= gpu else "  (does not fit)"
        print(f"  {r.name:<20} {r.plan.mesh.label():<18} "  # type: ignore[union-attr]
              f"reshard_after_forward={r.plan.units[0].reshard_after_forward!s:<5} "
              f"{r.replay.iteration_s:8.4g} s  exposed comm {r.replay.exposed_comm_s:8.4g} s  "
              f"{r.memory_bytes / GIB:7.4g} GiB{fits}")
    if gpu is not None:
        print(f"  GPU memory: {gpu / GIB:.4g} GiB")
    fastest = min(results, key=lambda r: (gpu is not None and r.memory_bytes > gpu,
                                          r.replay.iteration_s))
    gain = 100.0 * (results[0].replay.iteration_s / fastest.replay.iteration_s - 1.0)
    print(f"margin {margin.pct:.3g} % ({margin.source})")
    if best is results[0]:
        print(f"RECOMMENDATION: keep FSDP over every rank ({fastest.name} gains {gain:+.3g} %, "
              "not more than the margin):")
    else:
        print(f"RECOMMENDATION: {best.name} "
              f"({best.plan.mesh.label()}), "  # type: ignore[union-attr]
              f"{gain:+.3g} % against FSDP over every rank (replayed, not measured):")
    print(mesh_code(best.plan, tuple(trace.names),  # type: ignore[attr-defined]
                    "cpu" if device.startswith("cpu") else "cuda"))
    sizes = sorted({n for r in results for n in (r.plan.mesh.shard,  # type: ignore[union-attr]
                                                  r.plan.mesh.replicate)  # type: ignore[union-attr]
                    if n > 1})
    print(f"note: domain of the groups' prices: {pricer.domain(tuple(sizes))}")
    if args.plan_out is not None:
        best.plan.save(args.plan_out)
        print(f"-> {args.plan_out}")
    if args.json is not None:
        write_json_atomic(args.json, {"mesh": {
            "recommended": best.name, "gpu_memory_bytes": gpu, "cluster": pricer.describe(),
            "margin_pct": margin.pct, "margin_source": margin.source,
            "candidates": [r.row(gpu) for r in results]}})
        print(f"-> {args.json}")
    return 0
