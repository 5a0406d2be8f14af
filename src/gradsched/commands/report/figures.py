"""``gradsched report figure ...``: one figure (PDF + PNG) per verb.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._outputs import output_file
from gradsched.commands.report._common import columns_named


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``figure`` and its figures."""
    fig = rsub.add_parser("figure", help="draw one figure (PDF + PNG)")
    fsub = fig.add_subparsers(dest="figure", metavar="FIGURE", required=True)
    p = fsub.add_parser("fit-curves", help="(a) measured vs fitted time vs message size")
    p.add_argument("--comm", nargs="*", type=Path, default=[], help="comm trace CSVs")
    p.add_argument("--models", nargs="*", type=Path, default=[],
                   help="model JSONs named <trace stem>.<kind>.json")
    p.add_argument("--fits", type=Path, help="fit table CSV (held-out MAPE for the legend)")
    _figure_out(p)
    p.set_defaults(func=columns_named(_fig_fit_curves))
    p = fsub.add_parser("fit-mape", help="(b) held-out MAPE per file and model")
    p.add_argument("--fits", type=Path, required=True)
    _figure_out(p)
    p.set_defaults(func=columns_named(_fig_fit_mape))
    p = fsub.add_parser("replay-vs-world-size", help="(c) iteration time vs world size")
    p.add_argument("--input", type=Path, required=True, help="collected replay CSV")
    p.add_argument("--family", help="draw only the cases of this compute family (the "
                   "collected table's family column; default: every case)")
    p.add_argument("--calibrated-link", action="append", default=[], metavar="LINK",
                   help="a link a calibrated replay exists for (rule replay_calibrated, "
                        "e.g. tbf1gbit; repeatable): its plain rows are drawn hollow, as the "
                        "quoting rule leaves them out (report/quote_rule.py)")
    _figure_out(p)
    p.set_defaults(func=columns_named(_fig_replay))
    p = fsub.add_parser("timeline", help="(d) replay timelines of a few algorithms")
    p.add_argument("--input", nargs="+", type=Path, required=True,
                   help="<algorithm>.timeline.csv files")
    p.add_argument("--title", default="")
    _figure_out(p)
    p.set_defaults(func=columns_named(_fig_timeline))
    p = fsub.add_parser("gpu-generations", help="DDP's exposed communication and the best "
                        "plan's gain over it per GPU generation")
    p.add_argument("--input", type=Path, required=True, help="collected replay CSV")
    p.add_argument("--calibrated-link", action="append", default=[], metavar="LINK",
                   help="a link a calibrated replay exists for (rule replay_calibrated, "
                        "e.g. tbf1gbit; repeatable): its plain rows are drawn hollow, as the "
                        "quoting rule leaves them out (report/quote_rule.py)")
    _figure_out(p)
    p.set_defaults(func=columns_named(_fig_generations))
    p = fsub.add_parser("gaps", help="(e) MG-WFBP vs the contiguous optimum; gaps to the "
                        "lower bound")
    p.add_argument("--input", type=Path, required=True, help="collected replay CSV")
    p.add_argument("--calibrated-link", action="append", default=[], metavar="LINK",
                   help="a link a calibrated replay exists for (rule replay_calibrated, "
                        "e.g. tbf1gbit; repeatable): its plain rows are drawn hollow, as the "
                        "quoting rule leaves them out (report/quote_rule.py)")
    _figure_out(p)
    p.set_defaults(func=columns_named(_fig_gaps))


def _png_for(args: argparse.Namespace) -> Path:
    return args.png if args.png is not None else args.output.with_suffix(".png")


def _figure_out(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=output_file, required=True, help="PDF to write")
    p.add_argument("--png", type=output_file, help="PNG to write (default: the PDF's name, .png)")


def _done(args: argparse.Namespace) -> int:
    print(f"wrote {args.output} and {_png_for(args)}")
    return 0


def _fig_fit_curves(args: argparse.Namespace) -> int:
    from gradsched.report.fits_figures import fit_curves

    fit_curves(args.comm, args.models, args.fits, args.output, _png_for(args))
    return _done(args)


def _fig_fit_mape(args: argparse.Namespace) -> int:
    from gradsched.report.fits_figures import fit_mape

    fit_mape(args.fits, args.output, _png_for(args))
    return _done(args)


def _fig_replay(args: argparse.Namespace) -> int:
    from gradsched.report.replay import replay_vs_world_size

    replay_vs_world_size(args.input, args.output, _png_for(args), family=args.family,
                         calibrated=frozenset(args.calibrated_link))
    return _done(args)


def _fig_timeline(args: argparse.Namespace) -> int:
    from gradsched.report.timeline import timeline

    timeline(args.input, args.output, _png_for(args), title=args.title)
    return _done(args)


def _fig_generations(args: argparse.Namespace) -> int:
    from gradsched.report.gpu_generations import gpu_generations

    gpu_generations(args.input, args.output, _png_for(args),
                    calibrated=frozenset(args.calibrated_link))
    return _done(args)


def _fig_gaps(args: argparse.Namespace) -> int:
    from gradsched.report.replay import gaps

    gaps(args.input, args.output, _png_for(args), calibrated=frozenset(args.calibrated_link))
    return _done(args)
