"""``gradsched report topology-check``, ``topology-replay`` and ``topology-replay-table``:
two-level topologies against measured sweeps, and replayed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import integer
from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import add_table_parser, columns_named, table_from_csv
from gradsched.errors import ConfigError
from gradsched.limits import MAX_REPLAY_ITERATIONS


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``topology-check``, ``topology-replay`` and ``topology-replay-table``."""
    p = rsub.add_parser("topology-check", help="two-level topology (inter level identified "
                        "from the first multi-node sweep) vs every multi-node sweep")
    p.add_argument("--intra", required=True, help="one-node comm trace (the intra level)")
    p.add_argument("--sweep", nargs="+", required=True, type=Path,
                   help="multi-node all-ranks sweeps; the first identifies the inter level")
    p.add_argument("-o", "--output", type=output_file, required=True, help="check CSV")
    p.set_defaults(func=_topology_check)

    p = rsub.add_parser("topology-replay", help="compute traces replayed on two-level "
                        "topologies, flat vs hierarchical all-reduce (and on measured sweeps)")
    p.add_argument("--compute", nargs=2, action="append", required=True,
                   metavar=("NAME", "CSV"), help="compute trace (repeatable)")
    p.add_argument("--topology", nargs=3, action="append", required=True,
                   metavar=("NAME", "FILE", "COLLECTIVE"),
                   help="topology file and its collective model, flat or hierarchical "
                        "(repeatable)")
    p.add_argument("--measured", nargs=2, action="append", default=[],
                   metavar=("NAME", "SWEEP"),
                   help="the measured all-ranks sweep of topology NAME's cluster and world "
                        "size, replayed as the reference (repeatable)")
    p.add_argument("--algorithms", default="wfbp,ddp,mgwfbp",
                   help="comma-separated planners (default wfbp,ddp,mgwfbp)")
    p.add_argument("--iterations", type=integer(2, MAX_REPLAY_ITERATIONS), default=5,
                   help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    p.set_defaults(func=_topology_replay)

    p = add_table_parser(rsub, "topology-replay-table",
                         help="flat vs hierarchical per model, "
                              "cluster shape and algorithm (LaTeX + Markdown)",
                         input_help="topology-replay CSV")
    p.set_defaults(func=columns_named(_topology_replay_table))


def _topology_check(args: argparse.Namespace) -> int:
    from gradsched.io import write_csv_atomic
    from gradsched.report.topology import topology_check

    frame = topology_check(args.intra, args.sweep)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows)")
    return 0


def _topology_replay(args: argparse.Namespace) -> int:
    from gradsched.experiments import expand_algorithms
    from gradsched.experiments.topology import TopologyCase, topology_replay
    from gradsched.io import write_csv_atomic

    if args.iterations < 2:
        raise ConfigError(f"--iterations must be >= 2, got {args.iterations}")
    measured = dict(args.measured)
    names = [name for name, _, _ in args.topology]
    unknown = sorted(set(measured) - set(names))
    if unknown:
        raise ConfigError(f"--measured {unknown[0]}: no --topology of that name")
    computes = dict(args.compute)
    if len(computes) != len(args.compute):
        raise ConfigError("--compute: two traces share a name")
    cases = [TopologyCase(name, Path(file), collective,
                          Path(measured[name]) if name in measured else None)
             for name, file, collective in args.topology]
    frame = topology_replay(computes, cases, expand_algorithms(args.algorithms),
                            args.iterations)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows)")
    return 0


def _topology_replay_table(args: argparse.Namespace) -> int:
    from gradsched.report.topology_replay import topology_replay_table

    return table_from_csv(args, "topology-replay", topology_replay_table)
