"""``gradsched report accumulation-table``, ``fsdp-rival-table`` and
``fsdp-rival-measured-table``: FSDP2's accumulation modes and the sharded optimum against
PyTorch's FSDP-unit MILP, as tables (:mod:`gradsched.report.fsdp_rival`)."""

from __future__ import annotations

import argparse

from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv


def register(rsub: argparse._SubParsersAction) -> None:
    """Add the three table verbs."""
    p = add_table_parser(rsub, "accumulation-table", help="FSDP2's accumulation modes per "
                         "case (LaTeX + Markdown)", input_help="concatenated CSVs of "
                         "gradsched shard accumulate")
    p.set_defaults(func=columns_named(_accumulation))
    p = add_table_parser(rsub, "fsdp-rival-table", help="the sharded optimum vs PyTorch's "
                         "FSDP-unit MILP, replayed (LaTeX + Markdown)", input_help="concatenated "
                         "CSVs of gradsched shard rival")
    p.set_defaults(func=columns_named(_rival))
    p = add_table_parser(rsub, "fsdp-rival-measured-table", help="the rival plans run with "
                         "stock FSDP2 (LaTeX + Markdown)", input_help="gradsched shard run's "
                         "CSV of plans/<cap>/<algorithm>.json")
    p.set_defaults(func=columns_named(_measured))


def _accumulation(args: argparse.Namespace) -> int:
    from gradsched.report.fsdp_rival import accumulation_table

    return table_from_csv(args, "accumulation-modes", accumulation_table)


def _rival(args: argparse.Namespace) -> int:
    from gradsched.report.fsdp_rival import rival_table

    return table_from_csv(args, "fsdp-rival", rival_table)


def _measured(args: argparse.Namespace) -> int:
    from gradsched.experiments.sharded.rival import measured_rows
    from gradsched.report.fsdp_rival import rival_measured_table

    return table_from_csv(args, "fsdp-rival-measured",
                          lambda frame: rival_measured_table(measured_rows(frame)))
