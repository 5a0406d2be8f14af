"""``gradsched report at-scale``: the at-scale table (LaTeX + Markdown) and its macros;
``gradsched report at-scale-variants``: one row per variant of the study, so each switch's
effect is a difference of rows; ``gradsched report at-scale-effects``: one row per effect
with its calibration and validation; ``gradsched report at-scale-decompose``: what each
predicted point would need for its published step (:mod:`gradsched.report.at_scale`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``at-scale`` and ``at-scale-variants``."""
    p = rsub.add_parser("at-scale", help="published FSDP step times vs the calibrated replay "
                                         "and perfect scaling (table + macros)")
    p.add_argument("--input", type=Path, required=True,
                   help="per-point CSV of gradsched study at-scale")
    p.add_argument("--summary", type=Path, required=True,
                   help="summary JSON of gradsched study at-scale")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--macros", type=output_file, required=True,
                   help="LaTeX macros of the summary (\\gsAtScale...)")
    p.set_defaults(func=_at_scale)

    p = rsub.add_parser("at-scale-variants", help="one row per variant of the at-scale study "
                                                  "(comm models and switches) and its errors")
    p.add_argument("--summary", nargs="+", type=Path, required=True,
                   help="summary JSONs of gradsched study at-scale, one per variant, in order")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--record", type=output_file, default=None, metavar="JSON",
                   help="also write the record the replay commands quote at scale (the "
                        "variants of each combination of the overlap-slowdown and straggler "
                        "switches; committed as src/gradsched/experiments/at_scale/"
                        "record.json)")
    p.set_defaults(func=_variants)

    p = rsub.add_parser("at-scale-effects", help="one row per effect of scale of the at-scale "
                                                 "study: cause, calibration, validation")
    p.add_argument("--overlap-model", type=Path, required=True,
                   help="the overlap-slowdown model JSON (gradsched study overlap-slowdown)")
    p.add_argument("--stragglers", type=Path, required=True,
                   help="the table of gradsched study stragglers")
    p.add_argument("--unit-jitter", type=Path, required=True,
                   help="the table of gradsched study unit-jitter")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.set_defaults(func=_effects)

    p = rsub.add_parser("at-scale-decompose", help="what the at-scale study's predicted points "
                                                   "would need for their published steps "
                                                   "(table + macros)")
    p.add_argument("--input", type=Path, required=True,
                   help="decomposition CSV of gradsched study at-scale --decompose-out")
    p.add_argument("--points", type=Path, required=True,
                   help="per-point CSV of the same gradsched study at-scale run (the "
                        "decomposed groups' published growth, for the macros)")
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--macros", type=output_file, required=True,
                   help="LaTeX macros of its ranges (\\gsAtScaleDecomp...)")
    p.set_defaults(func=_decompose)


def _at_scale(args: argparse.Namespace) -> int:
    from gradsched.report.at_scale import (
        at_scale_macros,
        at_scale_table,
        load_points_frame,
        load_summary,
    )
    from gradsched.report.latex import write_macros, write_table

    table, align = at_scale_table(load_points_frame(args.input))
    write_table(table, args.tex, args.md, align=align, title="at-scale")
    write_macros(args.macros, at_scale_macros(load_summary(args.summary)))
    print(f"wrote {args.tex}, {args.md} ({len(table)} rows) and {args.macros}")
    return 0


def _variants(args: argparse.Namespace) -> int:
    from gradsched.report.at_scale import load_summary, variants_table
    from gradsched.report.latex import write_table

    summaries = [load_summary(path) for path in args.summary]
    record = None
    if args.record is not None:
        from gradsched.experiments.at_scale.record import build_record

        record = build_record(summaries)
    table, align = variants_table(summaries)
    write_table(table, args.tex, args.md, align=align, title="at-scale-variants")
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    if record is not None:
        from gradsched.io import write_json_atomic

        write_json_atomic(args.record, record)
        print(f"wrote {args.record} ({len(record['variants'])} variants)")
    return 0


def _effects(args: argparse.Namespace) -> int:
    from gradsched.experiments.at_scale.effects import effects_frame
    from gradsched.intermediates import read_csv_frame
    from gradsched.io import read_json
    from gradsched.report.at_scale import effects_table
    from gradsched.report.latex import write_table

    frame = effects_frame(read_json(args.overlap_model, missing="overlap model not found"),
                          read_csv_frame(args.stragglers), read_csv_frame(args.unit_jitter))
    table, align = effects_table(frame)
    write_table(table, args.tex, args.md, align=align, title="at-scale-effects")
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _decompose(args: argparse.Namespace) -> int:
    from gradsched.report.at_scale import (
        decompose_macros,
        decompose_table,
        load_decompose_frame,
        load_points_frame,
    )
    from gradsched.report.latex import write_macros, write_table

    frame = load_decompose_frame(args.input)
    table, align = decompose_table(frame)
    macros = decompose_macros(frame, load_points_frame(args.points), args.points)
    write_table(table, args.tex, args.md, align=align, title="at-scale-decompose")
    write_macros(args.macros, macros)
    print(f"wrote {args.tex}, {args.md} ({len(table)} rows) and {args.macros}")
    return 0
