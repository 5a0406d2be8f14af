"""``gradsched report ps-replay``, ``architectures`` and ``ps-replay-table``: parameter
servers and hierarchical all-reduce, replayed and run on the emulated cluster.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import integer, parse_int
from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv
from gradsched.errors import ConfigError
from gradsched.limits import MAX_REPLAY_ITERATIONS


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``ps-replay``, ``architectures`` and ``ps-replay-table``."""
    p = rsub.add_parser("ps-replay", help="compute traces replayed on all-reduce and on "
                        "parameter servers (BytePS-style, from a point-to-point sweep)")
    p.add_argument("--case", nargs=6, action="append", required=True,
                   metavar=("NAME", "CSV", "NETWORK", "P", "ALLREDUCE", "P2P"),
                   help="a compute trace on NETWORK at P workers: the all-reduce sweep or "
                        "model and the point-to-point sweep of the same links (repeatable)")
    p.add_argument("--layout", action="append", required=True, metavar="S[:colocated]",
                   help="server layout: S servers (an integer, or P for as many as "
                        "workers), :colocated with the workers or :separate (repeatable)")
    p.add_argument("--iterations", type=integer(2, MAX_REPLAY_ITERATIONS), default=5,
                   help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    p.set_defaults(func=_ps_replay)

    p = add_table_parser(rsub, "architectures",
                         help="hierarchical all-reduce and parameter-server "
                              "runs on the emulated cluster: measured vs predicted (table)",
                         input_help="paper/data/reexec/architectures/measured.json")
    p.set_defaults(func=_architectures)

    p = add_table_parser(rsub, "ps-replay-table",
                         help="all-reduce vs parameter servers per "
                              "model, network and world size (LaTeX + Markdown)",
                         input_help="ps-replay CSV")
    p.set_defaults(func=columns_named(_ps_replay_table))


def _ps_replay(args: argparse.Namespace) -> int:
    from gradsched.experiments.ps import PSCase, parse_layout, ps_replay
    from gradsched.io import write_csv_atomic

    if args.iterations < 2:
        raise ConfigError(f"--iterations must be >= 2, got {args.iterations}")
    cases = []
    for name, csv, network, world, allreduce, p2p in args.case:
        try:
            workers = parse_int(world)
        except ValueError:
            raise ConfigError(f"--case {name}: P must be an integer, got {world!r}") from None
        if workers < 2:
            raise ConfigError(f"--case {name}: P must be >= 2, got {workers}")
        cases.append(PSCase(name, Path(csv), network, workers, allreduce, p2p))
    frame = ps_replay(cases, [parse_layout(v) for v in args.layout], args.iterations)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows)")
    return 0


def _architectures(args: argparse.Namespace) -> int:
    from gradsched.report.architectures import architecture_table, load_runs
    from gradsched.report.tables import write_table

    table, align = architecture_table(load_runs(args.input))
    write_table(table, args.tex, args.md, align=align, title=args.title or "architectures")
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _ps_replay_table(args: argparse.Namespace) -> int:
    from gradsched.report.ps_replay import ps_replay_table

    return table_from_csv(args, "ps-replay", ps_replay_table)
