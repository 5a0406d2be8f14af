"""``gradsched report compare``: reproduced vs published numbers with tolerances.
"""

from __future__ import annotations

import argparse

from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import columns_named


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``compare``."""
    p = rsub.add_parser("compare", help="reproduced vs published numbers with tolerances")
    p.add_argument("--nccl", nargs=2, action="append", default=[], metavar=("LOG", "TRACE_CSV"))
    p.add_argument("--bcaffe", nargs=3, action="append", default=[],
                   metavar=("LOG", "RESULT_CSV", "CASE"))
    p.add_argument("--skip", nargs=3, action="append", default=[],
                   metavar=("CHECK", "CASE", "REASON"))
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=columns_named(_compare))


def _compare(args: argparse.Namespace) -> int:
    from gradsched.io import write_csv_atomic
    from gradsched.report.compare import (
        bcaffe_merge_row,
        compare_frame,
        nccl_busbw_row,
        skipped_row,
    )

    rows = [nccl_busbw_row(log, trace) for log, trace in args.nccl]
    rows += [bcaffe_merge_row(log, result, case) for log, result, case in args.bcaffe]
    rows += [skipped_row(check, case, reason) for check, case, reason in args.skip]
    frame = compare_frame(rows)
    write_csv_atomic(args.output, frame)
    for row in frame.itertuples(index=False):
        print(f"{row.verdict:8s} {row.check:13s} {row.case}: published {row.published:.6g} "
              f"reproduced {row.reproduced:.6g} {row.unit} (diff {row.rel_diff_pct:.3g}%, "
              f"tolerance {row.tolerance_pct:g}%)")
    return 0
