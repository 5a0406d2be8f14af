"""``gradsched shard mesh``: full sharding, full sharding resharded to a node after forward,
and HSDP, replayed on a two-level cluster (:mod:`gradsched.experiments.sharded.mesh`).

    gradsched shard mesh --compute A.csv [--compute B.csv] \\
        (--comm NCCL_MODEL.json --world-sizes 64,128 | --topology FILE) \\
        [--gpu-memory 80G] [--semantics streams|blocking] -o OUT.csv \\
        [--tex T.tex --md T.md --macros M.tex]

The cluster: an ``nccl`` comm model (its GPUs per node; ``world / GPUs per node`` nodes)
priced per group by :class:`gradsched.costmodel.mesh.NCCLPricer`, or a topology file
(docs/topology.md) by :class:`gradsched.costmodel.mesh.TopologyPricer`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from gradsched.commands._args import int_list, size
from gradsched.commands._outputs import output_file
from gradsched.costmodel.mesh import GroupPricer
from gradsched.errors import ConfigError, InputError
from gradsched.limits import MAX_RANKS


def register_mesh(ssub: argparse._SubParsersAction) -> None:
    p = ssub.add_parser("mesh", help="full sharding vs HSDP vs integer resharding on a "
                                     "two-level cluster")
    p.add_argument("--compute", type=Path, action="append", required=True,
                   help="compute trace CSV (repeat for several models)")
    p.add_argument("--comm", action="append", default=None,
                   help="an nccl comm model JSON (gradsched fit --cross-world-size "
                        "--hardware ...): its GPUs per node lay out the ranks; repeat to "
                        "compare networks (one row set per model's NICs)")
    p.add_argument("--world-sizes", type=int_list(2, MAX_RANKS, example="64,128,256"),
                   default=None, help="with --comm: the world sizes to compare meshes at")
    p.add_argument("--topology", type=Path, default=None, metavar="FILE",
                   help="instead of --comm: a two-level cluster {nodes, ranks_per_node, "
                        "intra, inter} (docs/topology.md), one world size")
    p.add_argument("--topology-collective", choices=["flat", "hierarchical"], default=None,
                   help="with --topology: the model of a group spanning several nodes")
    p.add_argument("--semantics", choices=("streams", "blocking"), default="streams",
                   help="streams (GPU) or blocking (FSDP2 on CPU with gloo)")
    p.add_argument("--gpu-memory", type=size(), default=None,
                   help="memory of one GPU (e.g. 80G): a mesh that needs more is marked "
                        "as not fitting and never recommended")
    p.add_argument("-o", "--output", type=output_file, required=True, help="rows CSV")
    p.add_argument("--tex", type=output_file, default=None, help="table LaTeX")
    p.add_argument("--md", type=output_file, default=None, help="table Markdown")
    p.add_argument("--macros", type=output_file, default=None, help="LaTeX macros")
    p.set_defaults(func=_mesh)


def pricers(args: argparse.Namespace) -> list[tuple[str, int, GroupPricer]]:
    """``(network, NICs per node, pricer)``: one per ``--comm`` nccl model and world size,
    or the topology's (NICs per node 0: not known)."""
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.costmodel.mesh import NCCLPricer, TopologyPricer
    from gradsched.costmodel.nccl.model import NCCLModel
    from gradsched.costmodel.topology import load_topology

    if (args.comm is None) == (args.topology is None):
        raise ConfigError("give exactly one of --comm (an nccl model) and --topology")
    if args.topology is not None:
        if args.world_sizes is not None:
            raise ConfigError("--world-sizes is for --comm; a --topology has its world size")
        return [(str(args.topology), 0, TopologyPricer(
            load_topology(args.topology), args.topology_collective or "hierarchical"))]
    if args.topology_collective is not None:
        raise ConfigError("--topology-collective needs --topology")
    if args.world_sizes is None:
        raise ConfigError("--comm needs --world-sizes")
    out: list[tuple[str, int, GroupPricer]] = []
    for spec in args.comm:
        model = load_comm_spec(spec)
        if not isinstance(model, NCCLModel):
            raise InputError("shard mesh needs an nccl comm model (it knows the GPUs per "
                             "node); give a --topology for any other", path=spec, field="kind")
        hw = model.hardware
        bad = [w for w in args.world_sizes if w % hw.gpus_per_node]
        if bad:
            raise ConfigError(f"--world-sizes {bad[0]} is not a whole number of "
                              f"{hw.gpus_per_node}-GPU nodes ({spec})")
        network = f"{hw.gpus_per_node} GPUs, {hw.nics_per_node} x " \
                  f"{hw.nic_Bps * 8 / 1e9:.0f}G NICs per node"
        out += [(network, hw.nics_per_node, NCCLPricer(model, w // hw.gpus_per_node))
                for w in args.world_sizes]
    return out


def _mesh(args: argparse.Namespace) -> int:
    from gradsched.experiments.sharded.mesh import MeshCase, compare_meshes, recommended
    from gradsched.io import write_csv_atomic
    from gradsched.report.hsdp import MESH_TABLE_ALIGN, mesh_macros, mesh_table
    from gradsched.report.latex import write_macros, write_table
    from gradsched.traces.bundle import ComputeTrace

    case = MeshCase(semantics=args.semantics, gpu_memory_bytes=args.gpu_memory)
    networks = pricers(args)
    rows = []
    for path in args.compute:
        if not path.is_file():
            raise InputError("compute trace not found", path=path)
        trace = ComputeTrace.load(path)
        name = str(trace.meta.get("model") or path.stem)
        for network, nics, pricer in networks:
            results = compare_meshes(trace, pricer, case)
            try:
                best = recommended(results, args.gpu_memory).name
            except ConfigError:
                best = None
            for r in results:
                rows.append({"model": name, "network": network, "nics_per_node": nics,
                             "world_size": pricer.world_size,
                             "nodes": pricer.nodes, "ranks_per_node": pricer.ranks_per_node,
                             **r.row(args.gpu_memory), "fastest": r.name == best,
                             "cluster": pricer.describe()})
    frame = pd.DataFrame(rows)
    write_csv_atomic(args.output, frame)
    table = mesh_table(frame)
    print(table.to_string(index=False))
    if args.tex is not None or args.md is not None:
        if args.tex is None or args.md is None:
            raise ConfigError("--tex and --md go together")
        write_table(table, args.tex, args.md, align=MESH_TABLE_ALIGN,
                    title="hsdp: FSDP vs reshard-to-node vs HSDP, replayed (not measured)")
    if args.macros is not None:
        write_macros(args.macros, mesh_macros(frame))
    print(f"-> {args.output}")
    return 0
