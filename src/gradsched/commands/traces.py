"""``gradsched traces validate|columns|inventory``: check trace bundles, print the column
dictionaries, list traces with their capture facts."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file
from gradsched.traces import COMM_COLUMNS, COMPUTE_COLUMNS, CommTrace, ComputeTrace
from gradsched.traces.columns import column_dictionary_markdown


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("traces", help="validate trace bundles; print column dictionaries")
    tsub = parser.add_subparsers(dest="traces_command", required=True)
    val = tsub.add_parser("validate", help="validate compute/comm trace CSVs and sidecars")
    val.add_argument("paths", nargs="+", type=Path, help="trace CSVs (kind read from the sidecar)")
    val.set_defaults(func=_validate)
    cols = tsub.add_parser("columns", help="print the column dictionaries as Markdown")
    cols.set_defaults(func=_columns)
    inv = tsub.add_parser("inventory", help="one row per trace: what, how, quality checks")
    inv.add_argument("paths", nargs="+", type=Path, help="trace CSVs")
    inv.add_argument("-o", "--output", required=True, type=output_file, help="CSV to write")
    inv.set_defaults(func=_inventory)


def _validate(args: argparse.Namespace) -> int:
    from gradsched.io import read_json
    from gradsched.traces.bundle import meta_path
    from gradsched.traces.importers.kineto_gpu import RECORD_KIND, CommRecord

    for path in args.paths:
        kind = "comm"
        sidecar = meta_path(path)
        if sidecar.is_file():
            kind = read_json(sidecar).get("kind", "comm")  # errors name the sidecar
        if kind == RECORD_KIND:  # a kineto-gpu comm record (collectives of one run)
            frame = CommRecord.load(path).frame
        else:
            frame = (ComputeTrace.load(path) if kind == "compute" else CommTrace.load(path)).frame
        print(f"ok  {path}  ({kind}, {len(frame)} rows)")
    return 0


def _inventory(args: argparse.Namespace) -> int:
    from gradsched.io import write_csv_atomic
    from gradsched.traces.inventory import inventory

    frame = inventory(args.paths)
    write_csv_atomic(args.output, frame)
    print(f"{len(frame)} traces -> {args.output}")
    return 0


def _columns(args: argparse.Namespace) -> int:
    print("## Compute trace\n")
    print(column_dictionary_markdown(COMPUTE_COLUMNS))
    print("## Comm trace\n")
    print(column_dictionary_markdown(COMM_COLUMNS))
    return 0
