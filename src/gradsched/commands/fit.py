"""``gradsched fit``: fit comm cost models to comm traces and report held-out error.

    gradsched fit A.csv [B.csv ...] [--model piecewise|alpha-beta|interp|all] [-o model.json]
                  [--table fits.csv] [--folds 5] [--in-place]
    gradsched fit --cross-world-size A.csv B.csv C.csv --fit-on 16 [--method nccl]
                  [--fabric issue-1229|none] [--hardware PRESET[:field=value,...]]
                  [--table crossws.csv] [-o model.json]
    gradsched fit --cross-world-size A.csv B.csv C.csv --fit-on 16,32 --method analytic
                  [--algorithm ring] [--from piecewise|alpha-beta]
                  [--scale-by world_size|nodes] [--table crossws.csv] [-o analytic.json]

``--method nccl`` (the default) fits the two-level NCCL model (gradsched.costmodel.nccl) on
one multi-node sweep (the smallest scale) and at most one single-node sweep; ``analytic``,
``scaled`` and ``both`` invert an algorithm's alpha-beta formula. ``--algorithm`` takes one
name, a comma list (ring,dbt) or all. In the cross-world-size table ``fit_world_sizes`` is
';'-separated (16;32), ``algorithm`` is ``nccl``, the formula's name, or ``scaled:<name>``,
and ``role`` says whether the row is the fit's residual on its own sweep (fitted) or a
world size it never saw (predicted).

Parameters and errors go to stdout; warnings (noisy series, reduced folds) to stderr as
``warning: FILE: ...``. Outputs are written atomically with a fixed float format.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from gradsched.commands._args import int_list, positive_int, real
from gradsched.commands._outputs import output_file
from gradsched.errors import ConfigError
from gradsched.limits import MAX_RANKS
from gradsched.staging import Staging

_world_size_list = int_list(1, MAX_RANKS, example="16,32", what="world sizes")


def _world_sizes(text: str) -> list[int]:
    return sorted(set(_world_size_list(text)))


_world_sizes.__name__ = "integers"


def _algorithms(text: str) -> list[str]:
    from gradsched.costmodel.formulas import ALGORITHMS

    if text == "all":
        return list(ALGORITHMS)
    names = [part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if n not in ALGORITHMS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: algorithms are {', '.join(ALGORITHMS)} (comma-separated) or all")
    return list(dict.fromkeys(names))


def _hardware(text: str) -> Any:
    from gradsched.costmodel.nccl.hardware import parse_hardware

    try:
        return parse_hardware(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_hardware.__name__ = "machine"


def register(sub: argparse._SubParsersAction) -> None:
    from gradsched.costmodel.fit import FIT_MODELS
    from gradsched.costmodel.formulas import ALGORITHMS
    from gradsched.costmodel.nccl.fabric import FABRICS
    from gradsched.costmodel.nccl.hardware import PRESETS

    p = sub.add_parser("fit", help="fit comm cost models to comm traces; held-out error",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+", type=Path, help="comm trace CSV(s)")
    p.add_argument("--model", default=None, choices=[*FIT_MODELS, "all"],
                   help="model to fit (default: piecewise)")
    p.add_argument("-o", "--output", type=output_file,
                   help="write the fitted model JSON (usable as --comm)")
    p.add_argument("--table", type=output_file,
                   help="write the fit (or cross-world-size) table CSV")
    p.add_argument("--folds", type=positive_int, default=None,
                   help="k of the k-fold held-out error by message size (default 5)")
    p.add_argument("--in-place", action="store_true",
                   help="fit the in-place rows instead of the out-of-place ones")
    p.add_argument("--cross-world-size", action="store_true",
                   help="derive an analytic model at --fit-on world sizes; error at the others")
    p.add_argument("--fit-on", type=_world_sizes, help="world sizes (ranks) to fit on, e.g. 16,32")
    p.add_argument("--algorithm", default=None, type=_algorithms,
                   help="collective algorithm(s) whose formula is inverted, comma-separated, "
                   f"or all ({', '.join(ALGORITHMS)}; default ring)")
    p.add_argument("--from", dest="source", default=None,
                   choices=["piecewise", "alpha-beta"],
                   help="fit at the fit world sizes that is inverted (default piecewise)")
    p.add_argument("--scale-by", default=None, choices=["world_size", "nodes"],
                   help="P in the formula: ranks (default) or nodes")
    p.add_argument("--method", default=None, choices=["nccl", "analytic", "scaled", "both"],
                   help="cross-world-size predictor: the two-level NCCL model (default), the "
                   "analytic formula, or the fit at the nearest fit world size scaled by the "
                   "formula's ratio")
    p.add_argument("--fabric", default=None, choices=list(FABRICS),
                   help="--method nccl: inter-node bandwidth falling with the node count as "
                   "fitted to NVIDIA/nccl issue 1229 (issue-1229, default) or not (none)")
    p.add_argument("--hardware", default=None, type=_hardware,
                   help="--method nccl: move the calibrated model to this machine (-o): "
                   f"{', '.join(PRESETS)}, optionally :field=value,... (e.g. "
                   "h100-8x400g:nics_per_node=4); bandwidths keep their fitted share of the "
                   "line rate; the table stays the measured machine's")
    p.add_argument("--gamma", type=real(0.0, 1.0, unit="s/byte"), default=None,
                   help="reduction compute seconds per byte held fixed (default 0)")
    p.set_defaults(func=_run)


def _warn(source: str, message: str) -> None:
    print(f"warning: {source}: {message}", file=sys.stderr)


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}%"


CROSS_DEFAULTS = {"fit_on": None, "algorithm": ["ring"], "source": "piecewise",
                  "scale_by": "world_size", "method": "nccl", "gamma": 0.0,
                  "fabric": "issue-1229", "hardware": None}
"""The settings of ``--cross-world-size`` and their defaults."""
FORMULA_SETTINGS = ("algorithm", "source", "scale_by", "gamma")
"""Settings only the formula methods (analytic, scaled, both) read."""
NCCL_SETTINGS = ("fabric", "hardware")
"""Settings only ``--method nccl`` reads."""
FIT_DEFAULTS = {"model": "piecewise", "folds": 5}
"""The settings of the per-file fit (not read by ``--cross-world-size``) and their defaults."""


def _settings(args: argparse.Namespace) -> None:
    """Refuse a setting of the other mode (nothing would read it); fill in the defaults of
    this one."""
    mine, other = (CROSS_DEFAULTS, FIT_DEFAULTS) if args.cross_world_size else \
        (FIT_DEFAULTS, CROSS_DEFAULTS)
    given = [name for name in other if getattr(args, name) is not None]
    if given:
        flag = "--from" if given[0] == "source" else f"--{given[0].replace('_', '-')}"
        if args.cross_world_size:
            raise ConfigError(f"{flag} is a setting of the per-file fit; --cross-world-size "
                              "does not read it (drop it)")
        raise ConfigError(f"{flag} is only meaningful with --cross-world-size")
    if args.cross_world_size:
        method = args.method or CROSS_DEFAULTS["method"]
        unread = FORMULA_SETTINGS if method == "nccl" else NCCL_SETTINGS
        given = [name for name in unread if getattr(args, name) is not None]
        if given:
            flag = "--from" if given[0] == "source" else f"--{given[0].replace('_', '-')}"
            raise ConfigError(f"{flag} is not read by --method {method} (drop it, or choose "
                              f"--method {'analytic' if method == 'nccl' else 'nccl'})")
    for name, value in mine.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _run(args: argparse.Namespace) -> int:
    _settings(args)
    if args.cross_world_size:
        return _run_cross(args)
    if args.folds < 2:
        raise ConfigError(f"--folds must be >= 2, got {args.folds}")
    from gradsched.costmodel.fit import FIT_MODELS

    kinds = list(FIT_MODELS) if args.model == "all" else [args.model]
    if args.output is not None and len(kinds) > 1:
        raise ConfigError("-o writes one model: choose --model piecewise, alpha-beta or interp")
    with Staging() as stage:  # the table and the model: both or neither
        return _fit(args, kinds, stage)


def _fit(args: argparse.Namespace, kinds: list[str], stage: Staging) -> int:
    from gradsched.costmodel.domain_notes import file_contradictions
    from gradsched.costmodel.fit import build_model, fit_file, fit_table
    from gradsched.io import write_csv_atomic

    table = stage.file(args.table) if args.table is not None else None
    output = stage.file(args.output) if args.output is not None else None
    fits = []
    for path in args.traces:
        file_fits = fit_file(path, kinds, folds=args.folds, in_place=args.in_place)
        seen: set[str] = set()
        for fit in file_fits:
            info = fit.info
            print(f"{fit.trace}  {info['collective']} {info['backend']} "
                  f"world_size={info['world_size']} nodes={info['nodes']}  {fit.model}: "
                  f"{fit.describe_params()}  train MAPE {_pct(fit.train_mape_pct)}, "
                  f"held-out MAPE {_pct(fit.heldout_mape_pct)} "
                  f"(max {_pct(fit.heldout_max_ape_pct)}, {fit.folds} folds, "
                  f"{fit.nbytes.size} sizes)")
            for note in fit.notes:
                text = f"{info['collective']} world_size={info['world_size']}: {note}"
                if text not in seen:
                    seen.add(text)
                    _warn(str(path), text)
        fits.extend(file_fits)
    for note in file_contradictions(args.traces, args.in_place):
        print(f"warning: {note}", file=sys.stderr)
    if table is not None:
        write_csv_atomic(table, fit_table(fits))
    if output is not None:
        build_model(kinds[0], fits).save(output)
    for path in (args.table, args.output):
        if path is not None:
            print(f"wrote {path}")
    return 0


def _run_cross(args: argparse.Namespace) -> int:
    if not args.fit_on:
        raise ConfigError("--cross-world-size needs --fit-on WORLD_SIZES (e.g. --fit-on 16,32)")
    with Staging() as stage:  # the table and the model: both or neither
        return _cross(args, stage)


def _cross(args: argparse.Namespace, stage: Staging) -> int:
    from gradsched.costmodel.crossws import CrossSettings, cross_table, cross_world_size
    from gradsched.costmodel.nccl.crossfit import NCCLSettings
    from gradsched.io import write_csv_atomic

    table = stage.file(args.table) if args.table is not None else None
    output = stage.file(args.output) if args.output is not None else None
    if args.method == "nccl":
        results = cross_world_size(args.traces, CrossSettings(
            args.fit_on, in_place=args.in_place, method="nccl",
            nccl=NCCLSettings(args.fabric, args.hardware)))
    else:
        methods = ["analytic", "scaled"] if args.method == "both" else [args.method]
        results = [
            res
            for algorithm in args.algorithm
            for method in methods
            for res in cross_world_size(args.traces, CrossSettings(
                args.fit_on, algorithm=algorithm, source=args.source, gamma=args.gamma,
                scale_by=args.scale_by, in_place=args.in_place, method=method))
        ]
    for res in results:
        _print_cross(args, res)
    from gradsched.costmodel.domain_notes import file_contradictions

    for note in file_contradictions(args.traces, args.in_place):
        print(f"warning: {note}", file=sys.stderr)
    if output is not None:
        if len(results) != 1:
            raise ConfigError(f"-o writes one model but there are {len(results)} "
                              "(collective, backend, algorithm, method) results: give one "
                              "algorithm and one method")
        chosen = results[0]
        if args.method == "scaled" and chosen.scaled is None:
            raise ConfigError("-o with --method scaled needs --scale-by world_size")
        chosen.predictor().save(output)
    if table is not None:
        write_csv_atomic(table, cross_table(results))
    for path in (args.table, args.output):
        if path is not None:
            print(f"wrote {path}")
    return 0


def _print_cross(args: argparse.Namespace, res: Any) -> None:
    model = res.model
    sizes = ",".join(map(str, res.fit_world_sizes))
    if res.algorithm == "nccl":
        inter, intra = model.params.inter, model.params.intra
        print(f"{res.series}  {res.collective} {res.backend}  nccl on {model.hardware.name} "
              f"fitted at world sizes {sizes} (fabric {args.fabric}): inter-node busbw "
              f"{inter.busbw_Bps / 1e9:.3g} GB/s, base latency LL/LL128/Simple "
              f"{'/'.join(f'{v * 1e6:.3g}' for v in inter.base_latency_s)} us; intra-node "
              f"busbw {intra.busbw_Bps / 1e9:.3g} GB/s")
    else:
        gbps = 1e-9 / model.beta if model.beta > 0 else math.inf
        label = res.rows[0]["algorithm"] if res.rows else res.algorithm
        print(f"{res.series}  {res.collective} {res.backend}  {label} fitted at world "
              f"sizes {sizes} (from {args.source}, P = {args.scale_by}): "
              f"alpha={model.alpha * 1e6:.4g}us per hop, beta={model.beta:.4g}s/B per link "
              f"({gbps:.3g} GB/s), gamma={model.gamma:.3g}s/B")
    for note in res.notes:
        _warn(res.series, f"{res.collective}: {note}")
    if not any(r["role"] == "predicted" for r in res.rows):
        _warn(res.series, f"{res.collective}: only the fitted world size(s) {sizes}: no "
              "other world size to predict; the residual on the fitted sweep is below")
    for row in res.rows:
        what = "fitted   " if row["role"] == "fitted" else "predict  "
        print(f"    {what}world_size={row['predict_world_size']} nodes={row['nodes']}: "
              f"MAPE {_pct(row['mape_pct'])} (max {_pct(row['max_ape_pct'])})")
    ext = model.meta.get("extrapolation") if hasattr(model, "meta") else None
    if ext and ext["median_ape_pct"] is not None:
        print(f"    extrapolation: median MAPE {ext['median_ape_pct']:.2f}% over world sizes "
              f"{','.join(map(str, ext['validated_world_sizes']))}, worst "
              f"{ext['max_ape_pct']:.2f}%")
