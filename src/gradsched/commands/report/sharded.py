"""``gradsched report sharded-table`` and ``sharded-measured-table``: sharded data parallelism
(FSDP2 units and prefetch) replayed over several cases (``gradsched study sharded``) and run
with stock FSDP2, as tables."""

from __future__ import annotations

import argparse

from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``sharded-table`` and ``sharded-measured-table``."""
    p = add_table_parser(rsub, "sharded-table", help="sharded planners per case (LaTeX + "
                         "Markdown)", input_help="sharded CSV")
    p.set_defaults(func=columns_named(_sharded_table))
    p = add_table_parser(rsub, "sharded-measured-table", help="sharded plans run with stock "
                         "FSDP2: measured vs predicted and vs FSDP2's defaults (LaTeX + "
                         "Markdown)", input_help="concatenated measured.csv of gradsched "
                         "shard measure")
    p.set_defaults(func=columns_named(_sharded_measured_table))
    p = add_table_parser(rsub, "sharded-dtypes-table", help="the collectives' dtypes with "
                         "FSDP2's and torchtitan's layouts (LaTeX + Markdown)",
                         input_help="CSV of gradsched shard dtypes")
    p.set_defaults(func=columns_named(_sharded_dtypes_table))


def _sharded_table(args: argparse.Namespace) -> int:
    from gradsched.report.sharded import sharded_table

    return table_from_csv(args, "sharded", sharded_table)


def _sharded_measured_table(args: argparse.Namespace) -> int:
    from gradsched.report.sharded import sharded_measured_table

    return table_from_csv(args, "sharded-measured", sharded_measured_table)


def _sharded_dtypes_table(args: argparse.Namespace) -> int:
    from gradsched.report.sharded_dtypes import sharded_dtypes_table

    return table_from_csv(args, "sharded-dtypes", sharded_dtypes_table)
