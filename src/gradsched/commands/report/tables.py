"""``gradsched report table``, ``forward`` and ``headline-models``: tables as LaTeX
(booktabs) and Markdown.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import parse_real
from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import columns_named
from gradsched.errors import ConfigError
from gradsched.report.tables import TABLES


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``table``, ``forward`` and ``headline-models``."""
    p = rsub.add_parser("table", help="write one table as LaTeX (booktabs) and Markdown")
    p.add_argument("name", choices=sorted(TABLES))
    p.add_argument("--input", nargs="+", type=Path, required=True)
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--title", default="")
    p.add_argument("--family", action="append", default=[],
                   help="replay table: keep only the cases of this compute family (repeatable)")
    p.add_argument("--calibrated-link", action="append", default=[], metavar="LINK",
                   help="replay table: a link a calibrated replay exists for (rule "
                        "replay_calibrated, e.g. tbf1gbit; repeatable): its plain cases are "
                        "marked '(uncal.)', as the quoting rule leaves them out")
    p.set_defaults(func=columns_named(_table))

    p = rsub.add_parser("forward", help="planner ranking vs the assumed forward time of a "
                        "trace that did not measure it (replay CSVs at several ratios)")
    p.add_argument("--run", nargs=2, action="append", required=True, metavar=("RATIO", "CSV"),
                   help="forward/backward ratio and the replay CSV made with it (repeatable)")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=columns_named(_forward))

    p = rsub.add_parser("headline-models", help="planner ranking of one case under each "
                        "fitted comm model kind (replay CSVs, one per kind)")
    p.add_argument("--run", nargs=2, action="append", required=True, metavar=("KIND", "CSV"),
                   help="model kind (alpha-beta, piecewise, interp) and the replay CSV made "
                        "with its fitted model (repeatable)")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=columns_named(_headline_models))


def _table(args: argparse.Namespace) -> int:
    from gradsched.report.tables import build_table

    if args.family and args.name != "replay":
        raise ConfigError(f"--family selects replay cases; table {args.name} has none")
    if args.calibrated_link and args.name != "replay":
        raise ConfigError(f"--calibrated-link marks replay cases; table {args.name} has none")
    table = build_table(args.name, args.input, args.tex, args.md, title=args.title,
                        families=args.family, calibrated=frozenset(args.calibrated_link))
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _forward(args: argparse.Namespace) -> int:
    from gradsched.report.forward import write_forward_table
    from gradsched.traces.forward import check_ratio

    runs = []
    for ratio, path in args.run:
        try:
            value = parse_real(ratio)
        except ValueError:
            raise ConfigError(f"--run {ratio!r}: the ratio must be a number") from None
        runs.append((check_ratio(value), Path(path)))
    table = write_forward_table(runs, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _headline_models(args: argparse.Namespace) -> int:
    from gradsched.report.headline import write_model_table

    table = write_model_table([(kind, Path(path)) for kind, path in args.run], args.tex,
                              args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0
