"""The paper's build: ``gradsched report captions``, ``latex-check``, ``claims`` and
``macros`` (every number the prose quotes).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gradsched.commands._args import world_size
from gradsched.commands._outputs import output_file, output_folder
from gradsched.commands.report._common import columns_named


def register_captions(rsub: argparse._SubParsersAction) -> None:
    """Add ``captions``."""
    p = rsub.add_parser("captions", help="the snakemake report's captions from the paper's "
                        "own (one .rst per figure and table)")
    p.add_argument("main_tex", type=Path, help="paper/main.tex")
    p.add_argument("-o", "--output", type=output_folder, required=True,
                   help="folder for the .rst files")
    p.set_defaults(func=_captions)


def register(rsub: argparse._SubParsersAction) -> None:
    """Add ``latex-check``, ``claims`` and ``macros``."""
    p = rsub.add_parser("latex-check", help="fail on a float too large for its page or an "
                        "undefined reference/citation in a LaTeX log")
    p.add_argument("log", type=Path, help="the .log of a LaTeX run")
    p.set_defaults(func=_latex_check)

    p = rsub.add_parser("claims", help="the claims (docs/claims.md) with the paper's numbers "
                        "(Markdown from the macros file)")
    p.add_argument("--macros", type=Path, required=True, help="paper/generated/macros.tex")
    p.add_argument("-o", "--output", type=output_file, required=True, help="claims Markdown")
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
                        "(paper/data/reexec/architectures/measured.json)")
    p.add_argument("--reexec-stats", type=Path,
                   help="re-execution statistics with bootstrap intervals (reexec analyze "
                        "--iterations-csv ... --stats)")
    p.add_argument("--reexec-iterations", type=Path,
                   help="re-execution iterations.csv (paper/data/reexec/iterations.csv): "
                        "bootstrap intervals of best against DDP and the executor's DDP plan")
    p.add_argument("--executor-bench", type=Path,
                   help="benchmarks/bench_executor_vs_ddp.py JSON")
    p.add_argument("--gpu-kineto", type=Path,
                   help="Kineto import of our GPU profiler traces "
                        "(data/h200/kineto-import-report.csv)")
    p.add_argument("--gpu-corrections", type=Path,
                   help="corrected GPU captures (data/h200/correction-report.csv)")
    p.add_argument("--gpu-capture", type=Path, action="append", default=[],
                   help="sidecar (.meta.json) of a GPU compute trace captured here (repeatable): "
                        "the hooks' overhead per trace")
    p.add_argument("--compute-trace", type=Path, action="append", default=[],
                   help="a committed compute trace whose facts the prose quotes (repeatable)")
    p.add_argument("--sweep", type=Path, action="append", default=[],
                   help="a committed sweep of the emulated cluster: its sidecar's line rate "
                        "(repeatable)")
    p.add_argument("--burst-sweep", type=Path,
                   help="the shaped sweep whose token-bucket burst the prose quotes")
    p.add_argument("--headline-model", nargs=2, action="append", default=[],
                   metavar=("KIND", "REPLAY_CSV"),
                   help="the headline case replayed with the fitted model of KIND "
                        "(alpha-beta, piecewise, interp; repeatable)")
    p.add_argument("--headline-comm", help="the headline's comm trace (file stem): the "
                   "held-out error of each model kind on it, from --fits")
    p.add_argument("--calibrated-replay", type=Path, action="append", default=[],
                   help="a replay with the calibrated per-collective cost (rule "
                        "replay_calibrated; repeatable): MG-WFBP against search under it")
    p.add_argument("--captured", type=Path,
                   help="inventory of the traces captured here (results/traces/captured.csv): "
                        "the CPU captures' hook overhead")
    p.add_argument("--sharded-measured", type=Path,
                   help="the sharded re-execution, concatenated (rule "
                        "sharded_measured_collect)")
    p.add_argument("--host-check", type=Path,
                   help="the host-check study (results/h200/host-check.csv): both replays' "
                        "errors per class of GPU busy share")
    p.add_argument("--headline-trace")
    p.add_argument("--headline-network")
    p.add_argument("--headline-world-size", type=world_size)
    p.add_argument("-o", "--output", type=output_file, required=True)
    p.set_defaults(func=columns_named(_macros))


def _captions(args: argparse.Namespace) -> int:
    from gradsched.report.captions import write_captions

    written = write_captions(args.main_tex, args.output)
    print(f"wrote {len(written)} captions to {args.output}")
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


def _read(path: Path | None):
    from gradsched.report.collect import read_csv_or_empty

    return None if path is None else read_csv_or_empty(path)


def _read_json(path: Path | None) -> dict | None:
    from gradsched.io import read_json

    return None if path is None else read_json(path)


def _architecture_runs(path: Path | None) -> list[dict] | None:
    if path is None:
        return None
    from gradsched.report.architectures import load_runs

    return load_runs(path)


def _headline_models(runs: list[list[str]]):
    if not runs:
        return None
    from gradsched.report.headline import read_model_runs

    return read_model_runs([(kind, Path(path)) for kind, path in runs])


def _calibrated(paths: list[Path]):
    """Replay results of rule ``replay_calibrated`` as one long frame; case =
    ``<compute>/<link>-p<P>`` from the path."""
    if not paths:
        return None
    import pandas as pd

    from gradsched.intermediates import REPLAY, read_intermediate

    return pd.concat([read_intermediate(p, (REPLAY,)).assign(case=f"{p.parent.name}/{p.stem}")
                      for p in paths], ignore_index=True)


def _reexec_frames(args: argparse.Namespace):
    """The re-execution's frames the prose quotes, computed by the measuring side."""
    from gradsched.reexec.analysis import quoted
    from gradsched.report.paper_macros import ReexecFrames

    measured, iterations = _read(args.reexec), _read(args.reexec_iterations)
    frames = quoted(measured, iterations)
    return ReexecFrames(measured=measured, cases=frames.cases, stats=_read(args.reexec_stats),
                        versus=frames.versus, stock_ddp=frames.stock_ddp,
                        level_pct=frames.level_pct, replicates=frames.replicates)


def _check_macro_inputs(args: argparse.Namespace) -> None:
    """Refuse an input no macro would read: a setting without the input it selects from,
    a trace or sweep the prose quotes nothing of."""
    from gradsched.errors import ConfigError

    for flag, given, needed, present in (
            ("--headline-trace", args.headline_trace, "--replay", args.replay),
            ("--headline-network", args.headline_network, "--replay", args.replay),
            ("--headline-world-size", args.headline_world_size, "--replay", args.replay),
            ("--headline-comm", args.headline_comm, "--fits", args.fits),
            ("--reexec-iterations", args.reexec_iterations, "--reexec", args.reexec),
            ("--sweep", args.sweep, "--compute-trace", args.compute_trace)):
        if given and not present:
            raise ConfigError(f"{flag} needs {needed}: the macros it feeds are computed from "
                              "that input (give it, or drop the option)")


def _prose_traces(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The ``--compute-trace`` and ``--sweep`` files, each one the prose quotes."""
    from gradsched.errors import ConfigError
    from gradsched.report.trace_facts import PROSE_LINKS, PROSE_TRACES, link_rates
    from gradsched.traces.bundle import CommTrace, ComputeTrace

    traces = [ComputeTrace.load(path) for path in args.compute_trace]
    for path, trace in zip(args.compute_trace, traces, strict=True):
        if trace.stem not in PROSE_TRACES:
            raise ConfigError(f"--compute-trace {path}: the prose quotes no facts of trace "
                              f"'{trace.stem}' (it quotes {', '.join(PROSE_TRACES)})")
    sweeps = [CommTrace.load(path) for path in args.sweep]
    for path, sweep in zip(args.sweep, sweeps, strict=True):
        if not set(link_rates([sweep])) & set(PROSE_LINKS):
            raise ConfigError(f"--sweep {path}: not a sweep of a link the prose quotes "
                              f"({', '.join(PROSE_LINKS)}) with its line rate in the sidecar")
    return traces, sweeps


def _macros(args: argparse.Namespace) -> int:
    from gradsched.report.latex import write_macros
    from gradsched.report.paper_macros import MacroInputs, all_macros
    from gradsched.report.replay import Headline
    from gradsched.traces.bundle import CommTrace

    _check_macro_inputs(args)
    compute_traces, sweeps = _prose_traces(args)

    macros = all_macros(MacroInputs(
        fits=_read(args.fits), cross=_read(args.crossws), collected=_read(args.replay),
        compare=_read(args.compare),
        headline=Headline(args.headline_trace, args.headline_network,
                          args.headline_world_size),
        reexec=_reexec_frames(args), executor_bench=_read_json(args.executor_bench),
        architectures=_architecture_runs(args.architectures),
        gpu_kineto=_read(args.gpu_kineto), gpu_corrections=_read(args.gpu_corrections),
        gpu_captures={path.name.removesuffix(".meta.json"): _read_json(path)
                      for path in args.gpu_capture},
        compute_traces=compute_traces, sweeps=sweeps,
        burst_sweep=None if args.burst_sweep is None else CommTrace.load(args.burst_sweep),
        headline_models=_headline_models(args.headline_model),
        headline_comm=args.headline_comm, calibrated=_calibrated(args.calibrated_replay),
        captured=_read(args.captured), sharded_measured=_read(args.sharded_measured),
        host_check=_read(args.host_check)))
    write_macros(args.output, macros)
    missing = sorted(k for k, v in macros.items() if v == "n/a")
    print(f"wrote {args.output} ({len(macros)} macros)")
    if missing:
        print(f"note: {len(missing)} macros have no data (n/a): {', '.join(missing)}")
    return 0
