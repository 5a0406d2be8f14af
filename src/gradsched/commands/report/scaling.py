"""``gradsched report scaling-table`` and ``scaling-macros``: the replay against published
multi-GPU throughput (``gradsched study scaling-check``), as a table and as macros; and
``host-check-table``: the host-aware replay against measured GPU iterations (``gradsched
study host-check``), the other check of a GPU replay against measurement.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import add_table_parser


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``scaling-table``, ``scaling-macros`` and ``host-check-table``."""
    p = add_table_parser(rsub, "host-check-table",
                         help="host-aware vs single-stream replay against CUDA-event "
                         "iterations", input_help="host-check CSV")
    p.set_defaults(func=_host_check_table)

    p = add_table_parser(rsub, "scaling-table",
                         help="predicted vs published throughput table",
                         input_help="scaling-check CSV")
    p.set_defaults(func=_scaling_table)

    p = rsub.add_parser("scaling-macros", help="paper macros of the scaling check")
    p.add_argument("--input", type=Path, required=True, help="scaling-check CSV")
    p.add_argument("-o", "--output", type=output_file, required=True, help="macros .tex to write")
    p.set_defaults(func=_scaling_macros)


def _scaling_table(args: argparse.Namespace) -> int:
    from gradsched.report.scaling import write_scaling_table

    table = write_scaling_table(args.input, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _host_check_table(args: argparse.Namespace) -> int:
    from gradsched.report.host_check import write_host_check_table

    table = write_host_check_table(args.input, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _scaling_macros(args: argparse.Namespace) -> int:
    from gradsched.report.scaling import write_scaling_macros

    macros = write_scaling_macros(args.input, args.output)
    print(f"wrote {args.output} ({len(macros)} macros)")
    return 0
