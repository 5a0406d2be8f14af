"""``gradsched report overlap-slowdown-table`` and ``overlap-slowdown-macros``: the
per-GPU-generation compute slowdown beside NCCL kernels, fitted and validated (``gradsched
study overlap-slowdown``), as a table and as the paper's macros."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import add_table_parser, columns_named


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``overlap-slowdown-table`` and ``overlap-slowdown-macros``."""
    p = add_table_parser(rsub, "overlap-slowdown-table",
                         help="compute slowdown beside NCCL kernels per GPU generation: fit "
                         "and validation errors", input_help="overlap-slowdown summary CSV")
    p.set_defaults(func=columns_named(_table))

    p = rsub.add_parser("overlap-slowdown-macros", help="paper macros of the overlap slowdown")
    p.add_argument("--input", type=Path, required=True, help="overlap-slowdown summary CSV")
    p.add_argument("-o", "--output", type=output_file, required=True,
                   help="macros .tex to write")
    p.set_defaults(func=columns_named(_macros))


def _table(args: argparse.Namespace) -> int:
    from gradsched.report.overlap_slowdown import write_overlap_slowdown_table

    table = write_overlap_slowdown_table(args.input, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _macros(args: argparse.Namespace) -> int:
    from gradsched.errors import InputError
    from gradsched.report.overlap_slowdown import write_overlap_macros

    if not args.input.is_file():
        raise InputError("overlap-slowdown CSV not found", path=args.input)
    macros = write_overlap_macros(args.input, args.output)
    print(f"wrote {args.output} ({len(macros)} macros)")
    return 0
