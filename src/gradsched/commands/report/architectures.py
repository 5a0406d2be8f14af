"""``gradsched report architectures`` and ``ps-replay-table``: parameter servers and
hierarchical all-reduce, replayed (``gradsched study ps-replay``) and run on the emulated
cluster.
"""

from __future__ import annotations

import argparse

from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``architectures`` and ``ps-replay-table``."""
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


def _architectures(args: argparse.Namespace) -> int:
    from gradsched.report.architectures import architecture_table, load_runs
    from gradsched.report.latex import write_table

    table, align = architecture_table(load_runs(args.input))
    write_table(table, args.tex, args.md, align=align, title=args.title or "architectures")
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _ps_replay_table(args: argparse.Namespace) -> int:
    from gradsched.report.ps_replay import ps_replay_table

    return table_from_csv(args, "ps-replay", ps_replay_table)
