"""``gradsched study stragglers``: the ranks' compute variation measured (H200 processes and
iterations), fitted per device class, and validated on the eight ranks of a public DLRM step
(:mod:`gradsched.experiments.stragglers`); writes the two CSVs and, with ``--tables``, their
tables (:mod:`gradsched.report.stragglers`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file, output_folder
from gradsched.errors import ConfigError, InputError

STEP_TRACES = tuple(Path("data/external") / p for p in (
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "kineto/worker0.1623143089861.pt.trace.json.gz",
    "hta/nccl_parser_config/nccl_data.json.gz",
    "hta/trace_diff/control/control.json.gz",
    "hta/trace_diff/test/test.json.gz"))
"""Public Kineto traces with three or more profiler steps (``data/external/README.md``)."""


def register_stragglers(ssub: argparse._SubParsersAction) -> None:
    """Add ``study stragglers``."""
    p = ssub.add_parser("stragglers", help="per-rank compute variation: measured, fitted per "
                        "device class, validated against a public 8-rank DLRM step")
    p.add_argument("--h200", type=Path, default=Path("data/h200"),
                   help="the H200 data folder (kineto-steps, kineto, gpu-check, "
                        "kineto-import-report.csv; default data/h200)")
    p.add_argument("--traces", type=Path, default=Path("traces/compute/h200"),
                   help="the H200 compute traces (their sidecars' no-hook times; default "
                        "traces/compute/h200)")
    p.add_argument("--dlrm", type=Path,
                   default=Path("data/external/param/dlrm_kineto.tar.gz"),
                   help="PARAM's 8-rank DLRM Kineto archive (the validation data)")
    p.add_argument("--step-traces", type=Path, nargs="*", default=list(STEP_TRACES),
                   metavar="TRACE.json.gz",
                   help="public Kineto traces with several profiler steps: their "
                        "step-to-step variation (default: the five in data/external)")
    p.add_argument("-o", "--output", type=output_file, required=True,
                   help="results CSV (measurements, fits, validations)")
    p.add_argument("--ep", type=output_file, required=True,
                   help="CSV of e_P and the stretch factors per world size")
    p.add_argument("--tables", type=output_folder, default=None, metavar="DIR",
                   help="also write stragglers.{tex,md} and stragglers-ep.{tex,md} here")
    p.set_defaults(func=_stragglers)


def _stragglers(args: argparse.Namespace) -> int:
    from gradsched.experiments.stragglers import StragglerInputs, study
    from gradsched.io import write_csv_atomic

    try:
        results, ep = study(StragglerInputs(args.h200, args.traces, args.dlrm,
                                                tuple(args.step_traces)))
    except InputError as exc:  # name the option whose file it is
        raise ConfigError(f"{_option_of(args, exc.path)}: {exc}") from None
    write_csv_atomic(args.output, results.round(6))
    write_csv_atomic(args.ep, ep.round(6))
    if args.tables is not None:
        from gradsched.report.stragglers import write_stragglers_tables

        folder = Path(args.tables)
        folder.mkdir(parents=True, exist_ok=True)
        write_stragglers_tables(results, ep, folder / "stragglers.tex",
                                folder / "stragglers.md", folder / "stragglers-ep.tex",
                                folder / "stragglers-ep.md")
    for rec in results.itertuples(index=False):
        if rec.kind == "validation":
            print(f"{rec.source} [{rec.device_class}]: cv {rec.cv:.3f}, error "
                  f"{rec.error_pct:+.1f} %")
    print(f"wrote {args.output} ({len(results)} rows), {args.ep} ({len(ep)} rows)")
    return 0


def _option_of(args: argparse.Namespace, path: str | None) -> str:
    """The input option ``path`` belongs to (``--h200``, ``--traces`` or ``--dlrm``)."""
    candidates = [("--dlrm", args.dlrm), ("--traces", args.traces), ("--h200", args.h200),
                  *(("--step-traces", t) for t in args.step_traces)]
    for flag, given in candidates:
        if path is not None and Path(path).resolve().is_relative_to(Path(given).resolve()):
            return f"{flag} {given}"
    return "study stragglers"
