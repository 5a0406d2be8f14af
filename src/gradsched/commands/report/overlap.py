"""``gradsched report overlap-slowdown-table``: the per-GPU-generation compute slowdown beside
NCCL kernels, fitted and validated (``gradsched study overlap-slowdown``), as a table."""

from __future__ import annotations

import argparse

from gradsched.commands.report._common import add_table_parser, columns_named


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``overlap-slowdown-table``."""
    p = add_table_parser(rsub, "overlap-slowdown-table",
                         help="compute slowdown beside NCCL kernels per GPU generation: fit "
                         "and validation errors", input_help="overlap-slowdown summary CSV")
    p.set_defaults(func=columns_named(_table))


def _table(args: argparse.Namespace) -> int:
    from gradsched.report.overlap_slowdown import write_overlap_slowdown_table

    table = write_overlap_slowdown_table(args.input, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0
