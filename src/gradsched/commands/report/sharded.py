"""``gradsched report sharded`` and ``sharded-table``: sharded data parallelism (FSDP2
units and prefetch) replayed over several cases, and its table."""

from __future__ import annotations

import argparse

from gradsched.commands._args import size
from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``sharded`` and ``sharded-table``."""
    p = rsub.add_parser("sharded", help="every sharded planner and the optimum, replayed on "
                        "several cases")
    p.add_argument("--case", nargs=6, action="append", required=True,
                   metavar=("NAME", "COMPUTE", "NETWORK", "COMM", "P", "SEMANTICS"),
                   help="a compute trace (named NAME) on NETWORK (the comm sweep or model "
                        "COMM) at P ranks, SEMANTICS streams (GPU) or blocking (CPU, gloo) "
                        "(repeatable)")
    p.add_argument("--memory-cap", type=size(), default=None,
                   help="cap on gathered parameters and gradients for the optimum (bytes)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    p.set_defaults(func=_sharded)
    p = add_table_parser(rsub, "sharded-table", help="sharded planners per case (LaTeX + "
                         "Markdown)", input_help="sharded CSV")
    p.set_defaults(func=columns_named(_sharded_table))
    p = add_table_parser(rsub, "sharded-measured-table", help="sharded plans run with stock "
                         "FSDP2: measured vs predicted and vs FSDP2's defaults (LaTeX + "
                         "Markdown)", input_help="concatenated measured.csv of gradsched "
                         "shard measure")
    p.set_defaults(func=columns_named(_sharded_measured_table))


def _sharded(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.costmodel.base import load_comm_spec
    from gradsched.errors import ConfigError
    from gradsched.experiments.sharded import compare
    from gradsched.io import write_csv_atomic
    from gradsched.traces.bundle import ComputeTrace
    from gradsched.units import parse_int

    rows = []
    for name, compute, network, comm, world, mode in args.case:
        if mode not in ("streams", "blocking"):
            raise ConfigError(f"--case {name}: semantics must be streams or blocking, not "
                              f"{mode!r}")
        trace = ComputeTrace.load(compute)
        world_size = parse_int(world)
        for row in compare(trace, load_comm_spec(comm), world_size, semantics=mode,
                           memory_cap_bytes=args.memory_cap):
            rows.append({"compute": name, "network": network, "world_size": world_size,
                         "semantics": mode, **row})
    write_csv_atomic(args.output, pd.DataFrame(rows))
    print(f"wrote {args.output} ({len(rows)} rows)")
    return 0


def _sharded_table(args: argparse.Namespace) -> int:
    from gradsched.report.sharded import sharded_table

    return table_from_csv(args, "sharded", sharded_table)


def _sharded_measured_table(args: argparse.Namespace) -> int:
    from gradsched.report.sharded import sharded_measured_table

    return table_from_csv(args, "sharded-measured", sharded_measured_table)
