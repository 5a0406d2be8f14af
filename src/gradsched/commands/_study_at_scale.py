"""``gradsched study at-scale``: published throughput of pure FSDP training predicted from
the smallest GPU count of each group (:mod:`gradsched.experiments.at_scale`).

    gradsched study at-scale --points data/external/at-scale/points.csv \\
        --comm a100=abci-a100-ib.scaled.json --comm h100=p5-h100.json \\
        [--overlap-slowdown] [--stragglers] [--unit-jitter unit-jitter.csv] \\
        [--variant NAME] -o points.csv [--groups-out groups.csv] \\
        [--summary-output summary.json] [--decompose-out D.csv [--decompose-groups RE]]
    gradsched study unit-jitter --fit TRACE... [--validate TRACE...] [--chunk-s 0.001] \\
        -o unit-jitter.csv

Parses the options into one :class:`~gradsched.experiments.at_scale.settings.AtScaleSettings`,
runs the study and writes its frames; no logic lives here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._args import real
from gradsched.commands._outputs import output_file
from gradsched.errors import ConfigError


def register_at_scale(ssub: argparse._SubParsersAction) -> None:
    """Add ``at-scale`` to ``gradsched study``."""
    p = ssub.add_parser("at-scale", help="published FSDP throughput at several GPU counts, "
                        "calibrated on the smallest count of each group, the rest predicted")
    p.add_argument("--points", type=Path, required=True,
                   help="published points CSV (data/external/at-scale/points.csv)")
    p.add_argument("--comm", action="append", required=True, metavar="GPU=MODEL",
                   help="the comm model of one GPU type (a100, h100, h200): a sweep CSV, a "
                        "fitted model JSON or inline alpha-beta (repeatable; every GPU type "
                        "of the points needs one)")
    p.add_argument("--overlap-slowdown", action="store_true",
                   help="compute slowed while communication overlaps it: the measured "
                        "slowdown of the trace's GPU generation (gradsched study "
                        "overlap-slowdown)")
    p.add_argument("--stragglers", action="store_true",
                   help="every collective waits for the slowest of P ranks: compute "
                        "stretched by 1 + cv e_P, cv measured for the trace's device class "
                        "(gradsched study stragglers)")
    p.add_argument("--unit-jitter", type=Path, default=None, metavar="CSV",
                   help="switch on the per-unit synchronisation waits: the independent "
                        "per-unit jitter of this table (gradsched study unit-jitter) "
                        "against each unit's slack")
    p.add_argument("--variant", default="before",
                   help="name of this combination of comm models and switches, in every row "
                        "and the summary (default: before)")
    p.add_argument("-o", "--output", type=output_file, required=True,
                   help="CSV: one row per point")
    p.add_argument("--groups-out", type=output_file, default=None,
                   help="CSV: one row per group")
    p.add_argument("--summary-output", type=output_file, default=None,
                   help="JSON: the aggregates over the predicted points")
    p.add_argument("--decompose-out", type=output_file, default=None, metavar="CSV",
                   help="CSV: for each predicted point, what would have to be true for the "
                        "published step (exposed communication, collective-time factor and "
                        "bus bandwidth, overlap slowdown; nothing applied)")
    p.add_argument("--decompose-groups", default=None, metavar="REGEX",
                   help="with --decompose-out: only the groups whose name matches (default: "
                        "every group)")
    p.set_defaults(func=_at_scale)


def register_unit_jitter(ssub: argparse._SubParsersAction) -> None:
    """Add ``unit-jitter`` to ``gradsched study``."""
    p = ssub.add_parser("unit-jitter", help="independent per-unit GPU kernel-time jitter "
                        "from Kineto traces of identical steps (fit and validation)")
    p.add_argument("--fit", type=Path, nargs="+", required=True, metavar="TRACE",
                   help="Kineto traces (3+ ProfilerStep ranges) the applied jitter is the "
                        "largest of")
    p.add_argument("--validate", type=Path, nargs="*", default=[], metavar="TRACE",
                   help="Kineto traces kept apart: measured the same way, the fit's error "
                        "against each")
    p.add_argument("--chunk-s", type=real(0.0, 10.0, low_open=True), default=1e-3,
                   help="kernel time per chunk in seconds (default 0.001)")
    p.add_argument("-o", "--output", type=output_file, required=True,
                   help="CSV: one row per trace")
    p.set_defaults(func=_unit_jitter)


def _unit_jitter(args: argparse.Namespace) -> int:
    from gradsched.experiments.at_scale.unit_jitter import study
    from gradsched.io import write_csv_atomic

    frame = study(args.fit, args.validate, args.chunk_s)
    write_csv_atomic(args.output, frame)
    fit = frame["fit_cv"].iloc[0]
    errors = frame["error_pct"].dropna()
    worst = f"{errors.abs().max():.0f} %" if len(errors) else "no validation trace measured"
    print(f"wrote {args.output}: per-unit jitter (fit, largest of "
          f"{int(((frame['role'] == 'fit') & frame['measured'].astype(bool)).sum())} traces) "
          f"{fit:.4f}; worst validation |error| {worst}")
    return 0


def comm_choices(specs: list[str]):
    """``GPU=MODEL`` items as comm choices, labelled by the model file's stem."""
    from gradsched.experiments.at_scale.settings import CommChoice

    out = []
    for item in specs:
        gpu, sep, spec = item.partition("=")
        if not sep or not gpu.strip() or not spec.strip():
            raise ConfigError(f"--comm {item!r}: expected GPU=MODEL (e.g. a100=model.json)")
        spec = spec.strip()
        label = spec if spec.startswith("alpha-beta:") else Path(spec).name.split(".")[0]
        out.append(CommChoice(gpu=gpu.strip(), spec=spec, label=label))
    return tuple(out)


def _regex(text: str) -> str:
    import re

    try:
        re.compile(text)
    except re.error as exc:
        raise ConfigError(f"--decompose-groups {text!r}: not a regular expression ({exc})") \
            from None
    return text


def _at_scale(args: argparse.Namespace) -> int:
    from gradsched.experiments.at_scale.points import load_points
    from gradsched.experiments.at_scale.settings import AtScaleSettings
    from gradsched.experiments.at_scale.study import groups_frame, run, summary
    from gradsched.experiments.at_scale.unit_jitter import load_unit_jitter
    from gradsched.io import write_csv_atomic, write_json_atomic

    if args.decompose_groups is not None and args.decompose_out is None:
        raise ConfigError("--decompose-groups needs --decompose-out")
    pattern = _regex(args.decompose_groups or "")
    jitter = None if args.unit_jitter is None else load_unit_jitter(args.unit_jitter)
    settings = AtScaleSettings(comm=comm_choices(args.comm), name=args.variant,
                               overlap_slowdown=args.overlap_slowdown,
                               stragglers=args.stragglers, unit_jitter=jitter)
    points = load_points(args.points)
    if args.decompose_out is not None:
        from gradsched.experiments.at_scale.decompose import matching_groups

        if not matching_groups(points, pattern):
            raise ConfigError(f"--decompose-groups {pattern!r}: no group matches")
    frame = run(points, settings)
    write_csv_atomic(args.output, frame)
    stats = summary(frame, settings.growth_floor, settings.unit_jitter)
    if args.groups_out is not None:
        write_csv_atomic(args.groups_out, groups_frame(frame))
    if args.summary_output is not None:
        write_json_atomic(args.summary_output, stats)
    if args.decompose_out is not None:
        from gradsched.experiments.at_scale.decompose import decompose

        parts = decompose(points, settings, pattern)
        write_csv_atomic(args.decompose_out, parts)
        print(f"wrote {args.decompose_out} ({len(parts)} predicted points decomposed)")
    print(f"wrote {args.output} ({len(frame)} rows); {stats['predicted_points']} points "
          f"predicted in {stats['groups']} groups: |error| median "
          f"{stats['median_abs_error_pct']} %, worst {stats['worst_abs_error_pct']} % "
          f"(perfect scaling {stats['perfect_median_abs_error_pct']} % / "
          f"{stats['perfect_worst_abs_error_pct']} %); optimistic in "
          f"{stats['optimistic_points']}; growth explained median "
          f"{stats['growth_explained_median_pct']} %, pooled "
          f"{stats['growth_explained_pooled_pct']} % ({stats['growth_points']} points)")
    return 0
