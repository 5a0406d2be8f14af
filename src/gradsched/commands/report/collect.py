"""``gradsched report collect`` and ``concat``: result CSVs into one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import columns_named
from gradsched.errors import ConfigError, InputError


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``collect`` and ``concat``."""
    p = rsub.add_parser("collect", help="concatenate per-case replay CSVs (+ trace, network, "
                        "nodes)")
    p.add_argument("--case", nargs=4, action="append", required=True,
                   metavar=("TRACE", "NETWORK", "COMM_CSV", "RESULT_CSV"))
    p.add_argument("--extrapolated", nargs=4, action="append", default=[],
                   metavar=("TRACE", "NETWORK", "REFERENCE_COMM_CSV", "RESULT_CSV"),
                   help="a replay at a world size no sweep measured (cross-world-size model); "
                   "the reference sweep gives the ranks per node")
    p.add_argument("--label", nargs=4, action="append", default=[],
                   metavar=("TRACE", "NETWORK", "FAMILY", "PAIRING"),
                   help="compute family and pairing (real, matched-gpu, matched-generation, "
                   "what-if) of the cases of one compute x network pair (default: no family, "
                   "what-if)")
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=columns_named(_collect))

    p = rsub.add_parser("concat", help="concatenate CSVs with the same columns")
    p.add_argument("inputs", nargs="*", type=Path, help="CSVs (none: an empty file)")
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=columns_named(_concat))


def _collect(args: argparse.Namespace) -> int:
    from gradsched.io import write_csv_atomic
    from gradsched.report.collect import Case, collect_cases

    labels: dict[tuple[str, str], tuple[str, str]] = {}
    for trace, network, family, pairing in args.label:
        if (trace, network) in labels:
            raise ConfigError(f"--label {trace} {network} given twice")
        labels[(trace, network)] = (family, pairing)
    known = {(t, n) for t, n, _, _ in args.case + args.extrapolated}
    unused = sorted(set(labels) - known)
    if unused:
        raise ConfigError(f"--label for a pair with no --case: {unused[0][0]} {unused[0][1]}")
    cases = [Case(t, n, Path(c), Path(r), *labels.get((t, n), ("", "what-if")))
             for t, n, c, r in args.case]
    cases += [Case(t, n, Path(c), Path(r), *labels.get((t, n), ("", "what-if")),
                   extrapolated=True) for t, n, c, r in args.extrapolated]
    frame = collect_cases(cases)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(cases)} cases, {len(frame)} rows)")
    return 0


def _concat(args: argparse.Namespace) -> int:
    import pandas as pd

    from gradsched.io import write_csv_atomic
    from gradsched.report.collect import read_csv_or_empty

    read = [(p, read_csv_or_empty(p)) for p in args.inputs]
    frames = [f for _, f in read if not f.empty]
    if frames:  # the same columns, or rows of different tables would be mixed silently
        first, columns = next((p, list(f.columns)) for p, f in read if not f.empty)
        for path, frame in read:
            if not frame.empty and list(frame.columns) != columns:
                extra = sorted(set(frame.columns) ^ set(columns))
                what = (f"columns {extra[:3]} are in one but not the other" if extra
                        else "the same columns in another order")
                raise InputError(f"not the columns of {first}: {what}; concat joins CSVs "
                                 "of one table", path=path)
    if not frames:
        write_csv_atomic(args.output, pd.DataFrame())
        print(f"wrote {args.output} (no rows)")
        return 0
    frame = pd.concat(frames, ignore_index=True)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows from {len(frames)} files)")
    return 0
