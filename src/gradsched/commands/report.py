"""``gradsched report ...``: figures, tables, prose macros and checks from result CSVs.

    gradsched report collect --case TRACE NETWORK COMM.csv RESULT.csv [...] \\
        [--extrapolated TRACE NETWORK REF.csv RESULT.csv ...] \\
        [--label TRACE NETWORK FAMILY PAIRING ...] -o replay.csv
    gradsched report concat A.csv B.csv ... -o all.csv
    gradsched report figure fit-curves --comm A.csv ... --models A.piecewise.json ... \\
        --fits fits.csv -o fig.pdf [--png fig.png]
    gradsched report figure fit-mape --fits fits.csv -o fig.pdf
    gradsched report figure replay-vs-world-size --input replay.csv [--family F] -o fig.pdf
    gradsched report figure timeline --input wfbp.timeline.csv mgwfbp.timeline.csv -o fig.pdf
    gradsched report figure gaps --input replay.csv -o fig.pdf
    gradsched report table fits|crossws|replay|compare --input X.csv --tex T.tex --md T.md
    gradsched report macros [--fits F] [--crossws C] [--replay R] [--compare K] -o macros.tex
    gradsched report topology-replay --compute NAME CSV ... \\
        --topology NAME FILE flat|hierarchical ... [--measured NAME SWEEP.csv ...] \\
        [--algorithms wfbp,ddp,mgwfbp] -o topo-replay.csv
    gradsched report topology-replay-table --input topo-replay.csv --tex T.tex --md T.md
    gradsched report scaling-check --spec config/published-scaling.yaml -o scaling.csv
    gradsched report scaling-table --input scaling.csv --tex T.tex --md T.md
    gradsched report compare [--nccl LOG TRACE.csv] [--bcaffe LOG RESULT.csv CASE] \\
        [--skip CHECK CASE REASON] -o compare.csv

No logic lives here: every sub-command calls :mod:`gradsched.report`.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError, InputError
from gradsched.report.tables import TABLES


def _png_for(args: argparse.Namespace) -> Path:
    return args.png if args.png is not None else args.output.with_suffix(".png")


def _figure_out(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=Path, required=True, help="PDF to write")
    p.add_argument("--png", type=Path, help="PNG to write (default: the PDF's name, .png)")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="figures, tables, macros and checks from results")
    rsub = parser.add_subparsers(dest="report_command", metavar="WHAT", required=True)

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
                   help="compute family and pairing (real, matched-gpu, what-if) of the cases "
                   "of one compute x network pair (default: no family, what-if)")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=_columns_named(_collect))

    p = rsub.add_parser("concat", help="concatenate CSVs with the same columns")
    p.add_argument("inputs", nargs="*", type=Path, help="CSVs (none: an empty file)")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=_columns_named(_concat))

    fig = rsub.add_parser("figure", help="draw one figure (PDF + PNG)")
    fsub = fig.add_subparsers(dest="figure", metavar="FIGURE", required=True)
    p = fsub.add_parser("fit-curves", help="(a) measured vs fitted time vs message size")
    p.add_argument("--comm", nargs="*", type=Path, default=[], help="comm trace CSVs")
    p.add_argument("--models", nargs="*", type=Path, default=[],
                   help="model JSONs named <trace stem>.<kind>.json")
    p.add_argument("--fits", type=Path, help="fit table CSV (held-out MAPE for the legend)")
    _figure_out(p)
    p.set_defaults(func=_columns_named(_fig_fit_curves))
    p = fsub.add_parser("fit-mape", help="(b) held-out MAPE per file and model")
    p.add_argument("--fits", type=Path, required=True)
    _figure_out(p)
    p.set_defaults(func=_columns_named(_fig_fit_mape))
    p = fsub.add_parser("replay-vs-world-size", help="(c) iteration time vs world size")
    p.add_argument("--input", type=Path, required=True, help="collected replay CSV")
    p.add_argument("--family", help="draw only the cases of this compute family (the "
                   "collected table's family column; default: every case)")
    _figure_out(p)
    p.set_defaults(func=_columns_named(_fig_replay))
    p = fsub.add_parser("timeline", help="(d) replay timelines of a few algorithms")
    p.add_argument("--input", nargs="+", type=Path, required=True,
                   help="<algorithm>.timeline.csv files")
    p.add_argument("--title", default="")
    _figure_out(p)
    p.set_defaults(func=_columns_named(_fig_timeline))
    p = fsub.add_parser("gaps", help="(e) MG-WFBP vs the contiguous optimum; gaps to the "
                        "lower bound")
    p.add_argument("--input", type=Path, required=True, help="collected replay CSV")
    _figure_out(p)
    p.set_defaults(func=_columns_named(_fig_gaps))

    p = rsub.add_parser("table", help="write one table as LaTeX (booktabs) and Markdown")
    p.add_argument("name", choices=sorted(TABLES))
    p.add_argument("--input", nargs="+", type=Path, required=True)
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument("--title", default="")
    p.add_argument("--family", action="append", default=[],
                   help="replay table: keep only the cases of this compute family (repeatable)")
    p.set_defaults(func=_columns_named(_table))

    p = rsub.add_parser("forward", help="planner ranking vs the assumed forward time of a "
                        "trace that did not measure it (replay CSVs at several ratios)")
    p.add_argument("--run", nargs=2, action="append", required=True, metavar=("RATIO", "CSV"),
                   help="forward/backward ratio and the replay CSV made with it (repeatable)")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=_columns_named(_forward))

    p = rsub.add_parser("topology-check", help="two-level topology (inter level identified "
                        "from the first multi-node sweep) vs every multi-node sweep")
    p.add_argument("--intra", required=True, help="one-node comm trace (the intra level)")
    p.add_argument("--sweep", nargs="+", required=True, type=Path,
                   help="multi-node all-ranks sweeps; the first identifies the inter level")
    p.add_argument("-o", "--output", type=Path, required=True, help="check CSV")
    p.set_defaults(func=_topology_check)

    _register_topology_replay(rsub)
    _register_ps_replay(rsub)

    p = rsub.add_parser("captions", help="the snakemake report's captions from the paper's "
                        "own (one .rst per figure and table)")
    p.add_argument("main_tex", type=Path, help="paper/main.tex")
    p.add_argument("-o", "--output", type=Path, required=True, help="folder for the .rst files")
    p.set_defaults(func=_captions)

    p = rsub.add_parser("scaling-check", help="predict published multi-GPU throughput "
                        "(DDP replay of a GPU trace) and compare")
    p.add_argument("--spec", type=Path, required=True,
                   help="YAML of published results (config/published-scaling.yaml)")
    p.add_argument("--iterations", type=int, default=5, help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=Path, required=True, help="CSV to write")
    p.set_defaults(func=_scaling_check)

    p = rsub.add_parser("scaling-table", help="predicted vs published throughput table")
    p.add_argument("--input", type=Path, required=True, help="scaling-check CSV")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=_scaling_table)

    p = rsub.add_parser("scaling-macros", help="paper macros of the scaling check")
    p.add_argument("--input", type=Path, required=True, help="scaling-check CSV")
    p.add_argument("-o", "--output", type=Path, required=True, help="macros .tex to write")
    p.set_defaults(func=_scaling_macros)

    p = rsub.add_parser("latex-check", help="fail on a float too large for its page or an "
                        "undefined reference/citation in a LaTeX log")
    p.add_argument("log", type=Path, help="the .log of a LaTeX run")
    p.set_defaults(func=_latex_check)

    p = rsub.add_parser("claims", help="the README's claims with the paper's numbers "
                        "(Markdown from the macros file)")
    p.add_argument("--macros", type=Path, required=True, help="paper/generated/macros.tex")
    p.add_argument("-o", "--output", type=Path, required=True, help="claims Markdown")
    p.set_defaults(func=_claims)

    p = rsub.add_parser("macros", help="\\newcommand for every number quoted in the paper")
    p.add_argument("--fits", type=Path)
    p.add_argument("--crossws", type=Path)
    p.add_argument("--replay", type=Path, help="collected replay CSV")
    p.add_argument("--compare", type=Path)
    p.add_argument("--reexec", type=Path,
                   help="re-execution measured.csv (paper/data/reexec/measured.csv)")
    p.add_argument("--architectures", type=Path,
                   help="hierarchical / parameter-server runs on the emulated cluster "
                        "(paper/data/reexec/issue18/measured.json)")
    p.add_argument("--reexec-stats", type=Path,
                   help="re-execution statistics with bootstrap intervals (reexec analyze "
                        "--iterations ... --stats)")
    p.add_argument("--executor-bench", type=Path,
                   help="benchmarks/bench_executor_vs_ddp.py JSON")
    p.add_argument("--headline-trace")
    p.add_argument("--headline-network")
    p.add_argument("--headline-world-size", type=int)
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=_columns_named(_macros))

    p = rsub.add_parser("compare", help="reproduced vs published numbers with tolerances")
    p.add_argument("--nccl", nargs=2, action="append", default=[], metavar=("LOG", "TRACE_CSV"))
    p.add_argument("--bcaffe", nargs=3, action="append", default=[],
                   metavar=("LOG", "RESULT_CSV", "CASE"))
    p.add_argument("--skip", nargs=3, action="append", default=[],
                   metavar=("CHECK", "CASE", "REASON"))
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=_columns_named(_compare))


def _read(path: Path | None):
    from gradsched.report.collect import read_csv_or_empty

    return None if path is None else read_csv_or_empty(path)


def _read_json(path: Path | None) -> dict | None:
    from gradsched.io import read_json

    return None if path is None else read_json(path)


def _columns_named(func: Callable[[argparse.Namespace], int]
                   ) -> Callable[[argparse.Namespace], int]:
    """A result CSV without a column the command reads is an input error naming the file(s)
    and the column, not an internal KeyError."""
    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except KeyError as exc:
            paths = []
            for key, value in sorted(vars(args).items()):
                if key in ("input", "replay", "fits", "crossws", "compare") and value:
                    paths += map(str, value if isinstance(value, list) else [value])
            raise InputError(f"the input has no column {exc.args[0]!r}: is it the CSV this "
                             f"command reads? ({'; '.join(paths)})") from None
    return run


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

    frames = [f for f in (read_csv_or_empty(p) for p in args.inputs) if not f.empty]
    if not frames:
        write_csv_atomic(args.output, pd.DataFrame())
        print(f"wrote {args.output} (no rows)")
        return 0
    frame = pd.concat(frames, ignore_index=True)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows from {len(frames)} files)")
    return 0


def _done(args: argparse.Namespace) -> int:
    print(f"wrote {args.output} and {_png_for(args)}")
    return 0


def _fig_fit_curves(args: argparse.Namespace) -> int:
    from gradsched.report.figures import fit_curves

    fit_curves(args.comm, args.models, args.fits, args.output, _png_for(args))
    return _done(args)


def _fig_fit_mape(args: argparse.Namespace) -> int:
    from gradsched.report.figures import fit_mape

    fit_mape(args.fits, args.output, _png_for(args))
    return _done(args)


def _fig_replay(args: argparse.Namespace) -> int:
    from gradsched.report.figures import replay_vs_world_size

    replay_vs_world_size(args.input, args.output, _png_for(args), family=args.family)
    return _done(args)


def _fig_timeline(args: argparse.Namespace) -> int:
    from gradsched.report.figures import timeline

    timeline(args.input, args.output, _png_for(args), title=args.title)
    return _done(args)


def _fig_gaps(args: argparse.Namespace) -> int:
    from gradsched.report.figures import gaps

    gaps(args.input, args.output, _png_for(args))
    return _done(args)


def _table(args: argparse.Namespace) -> int:
    from gradsched.report.tables import build_table

    if args.family and args.name != "replay":
        raise ConfigError(f"--family selects replay cases; table {args.name} has none")
    table = build_table(args.name, args.input, args.tex, args.md, title=args.title,
                        families=args.family)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _topology_check(args: argparse.Namespace) -> int:
    from gradsched.io import write_csv_atomic
    from gradsched.report.topology import topology_check

    frame = topology_check(args.intra, args.sweep)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows)")
    return 0


def _register_topology_replay(rsub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--iterations", type=int, default=5, help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=Path, required=True, help="CSV to write")
    p.set_defaults(func=_topology_replay)

    p = rsub.add_parser("topology-replay-table", help="flat vs hierarchical per model, "
                        "cluster shape and algorithm (LaTeX + Markdown)")
    p.add_argument("--input", type=Path, required=True, help="topology-replay CSV")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=_columns_named(_topology_replay_table))


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


def _register_ps_replay(rsub: argparse._SubParsersAction) -> None:
    p = rsub.add_parser("ps-replay", help="compute traces replayed on all-reduce and on "
                        "parameter servers (BytePS-style, from a point-to-point sweep)")
    p.add_argument("--case", nargs=6, action="append", required=True,
                   metavar=("NAME", "CSV", "NETWORK", "P", "ALLREDUCE", "P2P"),
                   help="a compute trace on NETWORK at P workers: the all-reduce sweep or "
                        "model and the point-to-point sweep of the same links (repeatable)")
    p.add_argument("--layout", action="append", required=True, metavar="S[:colocated]",
                   help="server layout: S servers (an integer, or P for as many as "
                        "workers), :colocated with the workers or :separate (repeatable)")
    p.add_argument("--iterations", type=int, default=5, help="replayed iterations (>= 2)")
    p.add_argument("-o", "--output", type=Path, required=True, help="CSV to write")
    p.set_defaults(func=_ps_replay)

    p = rsub.add_parser("architectures", help="hierarchical all-reduce and parameter-server "
                        "runs on the emulated cluster: measured vs predicted (table)")
    p.add_argument("--input", type=Path, required=True,
                   help="paper/data/reexec/issue18/measured.json")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=_architectures)

    p = rsub.add_parser("ps-replay-table", help="all-reduce vs parameter servers per "
                        "model, network and world size (LaTeX + Markdown)")
    p.add_argument("--input", type=Path, required=True, help="ps-replay CSV")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=_columns_named(_ps_replay_table))


def _architecture_runs(path: Path | None) -> list[dict] | None:
    if path is None:
        return None
    from gradsched.report.architectures import load_runs

    return load_runs(path)


def _architectures(args: argparse.Namespace) -> int:
    from gradsched.report.architectures import architecture_table, load_runs
    from gradsched.report.tables import write_table

    table, align = architecture_table(load_runs(args.input))
    write_table(table, args.tex, args.md, align=align, title=args.title or "architectures")
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _ps_replay(args: argparse.Namespace) -> int:
    from gradsched.experiments.ps import PSCase, parse_layout, ps_replay
    from gradsched.io import write_csv_atomic

    if args.iterations < 2:
        raise ConfigError(f"--iterations must be >= 2, got {args.iterations}")
    cases = []
    for name, csv, network, world, allreduce, p2p in args.case:
        try:
            workers = int(world)
        except ValueError:
            raise ConfigError(f"--case {name}: P must be an integer, got {world!r}") from None
        if workers < 2:
            raise ConfigError(f"--case {name}: P must be >= 2, got {workers}")
        cases.append(PSCase(name, Path(csv), network, workers, allreduce, p2p))
    frame = ps_replay(cases, [parse_layout(v) for v in args.layout], args.iterations)
    write_csv_atomic(args.output, frame)
    print(f"wrote {args.output} ({len(frame)} rows)")
    return 0


def _replay_table(args: argparse.Namespace, name: str, make_table: Any) -> int:
    """Read a replay CSV (``--input``), write ``make_table``'s table as LaTeX + Markdown."""
    from gradsched.report.collect import read_csv_or_empty
    from gradsched.report.tables import write_table

    if not args.input.is_file():
        raise InputError(f"{name} CSV not found", path=args.input)
    table, align = make_table(read_csv_or_empty(args.input))
    write_table(table, args.tex, args.md, align=align, title=args.title or name)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _ps_replay_table(args: argparse.Namespace) -> int:
    from gradsched.report.ps_replay import ps_replay_table

    return _replay_table(args, "ps-replay", ps_replay_table)


def _topology_replay_table(args: argparse.Namespace) -> int:
    from gradsched.report.topology_replay import topology_replay_table

    return _replay_table(args, "topology-replay", topology_replay_table)


def _captions(args: argparse.Namespace) -> int:
    from gradsched.report.captions import write_captions

    written = write_captions(args.main_tex, args.output)
    print(f"wrote {len(written)} captions to {args.output}")
    return 0


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


def _latex_check(args: argparse.Namespace) -> int:
    import sys

    from gradsched.report.latexlog import check_log

    found = check_log(args.log)
    for message in found:
        print(f"error: {args.log}: {message}", file=sys.stderr)
    if found:
        return 2
    print(f"{args.log}: no float too large, no undefined reference")
    return 0


def _claims(args: argparse.Namespace) -> int:
    from gradsched.report.claims import write_claims

    write_claims(args.macros, args.output)
    print(f"wrote {args.output}")
    return 0


def _forward(args: argparse.Namespace) -> int:
    from gradsched.report.forward import write_forward_table
    from gradsched.traces.forward import check_ratio

    runs = []
    for ratio, path in args.run:
        try:
            value = float(ratio)
        except ValueError:
            raise ConfigError(f"--run {ratio!r}: the ratio must be a number") from None
        runs.append((check_ratio(value), Path(path)))
    table = write_forward_table(runs, args.tex, args.md, title=args.title)
    print(f"wrote {args.tex} and {args.md} ({len(table)} rows)")
    return 0


def _macros(args: argparse.Namespace) -> int:
    from gradsched.report.macros import Headline, all_macros, write_macros

    macros = all_macros(_read(args.fits), _read(args.crossws), _read(args.replay),
                        _read(args.compare),
                        Headline(args.headline_trace, args.headline_network,
                                 args.headline_world_size), _read(args.reexec),
                        _read_json(args.executor_bench), _read(args.reexec_stats),
                        _architecture_runs(args.architectures))
    write_macros(args.output, macros)
    missing = sorted(k for k, v in macros.items() if v == "n/a")
    print(f"wrote {args.output} ({len(macros)} macros)")
    if missing:
        print(f"note: {len(missing)} macros have no data (n/a): {', '.join(missing)}")
    return 0


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
