"""``gradsched report collectives-at-scale-table``: the leave-world-sizes-out validation of
the cross-world-size methods (one ``fit --cross-world-size --table`` CSV per method).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import columns_named
from gradsched.errors import InputError


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``collectives-at-scale-table``."""
    p = rsub.add_parser("collectives-at-scale-table",
                        help="MAPE per world size of each cross-world-size method "
                             "(LaTeX + Markdown)")
    p.add_argument("--case", nargs=2, action="append", required=True,
                   metavar=("LABEL", "CSV"), help="a method's label and its cross-world-size "
                   "table (fit --cross-world-size --table); repeat per method")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=columns_named(_run))


def _run(args: argparse.Namespace) -> int:
    from gradsched.report.collect import read_csv_or_empty
    from gradsched.report.collectives_at_scale import validation_table
    from gradsched.report.latex import write_table

    cases = []
    for label, path in args.case:
        if not Path(path).is_file():
            raise InputError("cross-world-size CSV not found", path=path)
        cases.append((label, read_csv_or_empty(Path(path))))
    table, align = validation_table(cases)
    write_table(table, args.tex, args.md, align=align,
                title=args.title or "collectives at scale")
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0
