"""``gradsched report topology-replay-table``: the table of compute traces replayed on
two-level topologies (``gradsched study topology-replay``).
"""

from __future__ import annotations

import argparse

from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``topology-replay-table``."""
    p = add_table_parser(rsub, "topology-replay-table",
                         help="flat vs hierarchical per model, "
                              "cluster shape and algorithm (LaTeX + Markdown)",
                         input_help="topology-replay CSV")
    p.set_defaults(func=columns_named(_topology_replay_table))


def _topology_replay_table(args: argparse.Namespace) -> int:
    from gradsched.report.topology import topology_replay_table

    return table_from_csv(args, "topology-replay", topology_replay_table)
