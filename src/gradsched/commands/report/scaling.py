"""``gradsched report scaling-check``, ``scaling-table`` and ``scaling-macros``: the
replay against published multi-GPU throughput.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import integer
from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import add_table_parser
from gradsched.errors import ConfigError
from gradsched.limits import MAX_REPLAY_ITERATIONS


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``scaling-check``, ``scaling-table`` and ``scaling-macros``."""
    p = rsub.add_parser("scaling-check", help="predict published multi-GPU throughput "
                        "(DDP replay of a GPU trace) and compare")
    p.add_argument("--spec", type=Path, required=True,
                   help="YAML of published results (config/published-scaling.yaml)")
    p.add_argument("--iterations", type=integer(2, MAX_REPLAY_ITERATIONS), default=5,
                   help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=output_file, required=True, help="CSV to write")
    p.set_defaults(func=_scaling_check)

    p = add_table_parser(rsub, "scaling-table",
                         help="predicted vs published throughput table",
                         input_help="scaling-check CSV")
    p.set_defaults(func=_scaling_table)

    p = rsub.add_parser("scaling-macros", help="paper macros of the scaling check")
    p.add_argument("--input", type=Path, required=True, help="scaling-check CSV")
    p.add_argument("-o", "--output", type=output_file, required=True, help="macros .tex to write")
    p.set_defaults(func=_scaling_macros)


def _scaling_check(args: argparse.Namespace) -> int:
    from gradsched.experiments.scaling import load_spec, scaling_check
    from gradsched.io import write_csv_atomic

    if args.iterations < 2:
        raise ConfigError(f"--iterations must be >= 2, got {args.iterations}")
    frame = scaling_check(load_spec(args.spec), args.iterations)
    write_csv_atomic(args.output, frame)
    for row in frame.itertuples(index=False):
        print(f"{row.system}: 1 GPU {row.predicted_img_s_1:.0f} vs {row.published_img_s_1:.0f} "
              f"img/s ({row.error_1_pct:+.1f}%), {row.world_size} GPUs "
              f"{row.predicted_img_s_p:.0f} vs {row.published_img_s_p:.0f} img/s "
              f"({row.error_p_pct:+.1f}%), scaling {row.predicted_scaling:.2f}x vs "
              f"{row.published_scaling:.2f}x [{row.comm_model}]")
    print(f"wrote {args.output}")
    return 0


def _scaling_table(args: argparse.Namespace) -> int:
    from gradsched.report.scaling import write_scaling_table

    table = write_scaling_table(args.input, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _scaling_macros(args: argparse.Namespace) -> int:
    from gradsched.report.scaling import write_scaling_macros

    macros = write_scaling_macros(args.input, args.output)
    print(f"wrote {args.output} ({len(macros)} macros)")
    return 0
