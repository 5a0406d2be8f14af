"""``gradsched import nccl-tests|osu|bcaffe|manifest|kineto``: turn public logs into trace bundles.

Warnings go to stderr as ``warning: FILE line N: ...``; errors name the file, line and
field and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradsched.commands._args import positive_int
from gradsched.traces.importers import ImportResult


def _provenance_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", help="provenance text (default: the file's '# source:')")
    parser.add_argument("--hardware", help="hardware text (default: the file's '# setup:')")
    parser.add_argument("--interconnect", help="interconnect text stored in the metadata")


def _add_nccl(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("nccl-tests", help="nccl-tests / rccl-tests stdout -> comm trace")
    p.add_argument("log", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="output CSV")
    p.add_argument("--world-size", type=positive_int,
                   help="rank count (default: the 'Rank N' lines)")
    p.add_argument("--nodes", type=positive_int,
                   help="node count (default: distinct hosts of the 'Rank N' lines)")
    p.add_argument("--collective", help="collective (default: from the '*_perf' name)")
    p.add_argument("--backend", help="backend (default: nccl, or rccl for rccl-tests)")
    p.add_argument("--error-tolerance", type=float, default=1e-2,
                   help="largest accepted 'error' value in the old layout (default 1e-2)")
    _provenance_flags(p)
    p.set_defaults(func=_run_nccl)


def _add_osu(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("osu", help="OSU Micro-Benchmarks latency output -> comm trace")
    p.add_argument("log", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="output CSV")
    p.add_argument("--world-size", type=positive_int, required=True, help="rank count")
    p.add_argument("--nodes", type=positive_int, required=True, help="node count")
    p.add_argument("--backend", default="mpi", help="backend (default: mpi)")
    p.add_argument("--collective", help="collective (default: from the OSU title)")
    _provenance_flags(p)
    p.set_defaults(func=_run_osu)


def _add_bcaffe(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("bcaffe", help="B-Caffe per-blob dump -> compute (+ comm) trace")
    p.add_argument("log", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="output compute CSV")
    p.add_argument("--comm-out", type=Path, help="also write the per-size comm trace here")
    p.add_argument("--world-size", type=positive_int, required=True,
                   help="MPI rank count (B-Caffe: one rank per node)")
    p.add_argument("--nodes", type=positive_int, required=True, help="node count")
    p.add_argument("--model", default="googlenet")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--device", default="NVIDIA Tesla K80")
    _provenance_flags(p)
    p.set_defaults(func=_run_bcaffe)


def _add_manifest(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("manifest", help="re-import every file listed in a manifest")
    p.add_argument("manifest", type=Path, help="e.g. traces/manifest.yaml")
    p.add_argument("--src", type=Path, required=True,
                   help="the external folder the manifest's paths are relative to")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="output folder the manifest's 'out' paths are relative to")
    p.set_defaults(func=_run_manifest)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``gradsched import ...``."""
    parser = sub.add_parser("import", help="import public measurement logs as traces")
    isub = parser.add_subparsers(dest="import_command", metavar="FORMAT", required=True)
    _add_nccl(isub)
    _add_osu(isub)
    _add_bcaffe(isub)
    _add_manifest(isub)
    _add_kineto(isub)


def _add_kineto(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("kineto", help="PyTorch profiler (Kineto) JSON -> per-iteration and "
                        "per-collective CSVs")
    p.add_argument("traces", type=Path, nargs="+", help="TRACE.json or TRACE.json.gz, one "
                   "per rank")
    p.add_argument("-o", "--output", required=True, metavar="PREFIX",
                   help="writes PREFIX.iterations.csv, PREFIX.collectives.csv, "
                   "PREFIX.meta.json")
    p.add_argument("--no-clip", action="store_true",
                   help="keep CPU collective spans as recorded (default: clip each at the "
                   "end of its step and the next span on its thread)")
    p.set_defaults(func=_run_kineto)


def _run_kineto(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.kineto import import_kineto

    result = import_kineto(args.traces, clip_cpu_spans=not args.no_clip)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    paths = result.write(args.output)
    print(f"wrote {', '.join(str(p) for p in paths)} ({len(result.iterations)} iterations, "
          f"{len(result.collectives)} collectives, {len(result.warnings)} warnings)")
    return 0


def _report(result: ImportResult) -> None:
    for warning in result.warnings:
        print(warning.render(), file=sys.stderr)


def _run_nccl(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.nccl_tests import Options, import_nccl_tests

    options = Options(
        world_size=args.world_size, nodes=args.nodes, collective=args.collective,
        backend=args.backend, source=args.source, hardware=args.hardware,
        interconnect=args.interconnect, error_tolerance=args.error_tolerance,
    )
    result = import_nccl_tests(args.log, options)
    return _save_comm(result, args.output)


def _save_comm(result: ImportResult, output: Path) -> int:
    """Print the importer's warnings, write its comm trace and say so."""
    _report(result)
    assert result.comm is not None
    result.comm.save(output)
    print(f"wrote {output} ({len(result.comm.frame)} rows, {len(result.warnings)} warnings)")
    return 0


def _run_osu(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.osu import Options, import_osu

    options = Options(
        world_size=args.world_size, nodes=args.nodes, backend=args.backend,
        collective=args.collective, source=args.source, hardware=args.hardware,
        interconnect=args.interconnect,
    )
    result = import_osu(args.log, options)
    return _save_comm(result, args.output)


def _run_bcaffe(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.bcaffe import Options, import_bcaffe

    options = Options(
        world_size=args.world_size, nodes=args.nodes, model=args.model,
        batch_size=args.batch_size, device=args.device, source=args.source,
        hardware=args.hardware, with_comm=args.comm_out is not None,
    )
    if args.interconnect:
        options.interconnect = args.interconnect
    result = import_bcaffe(args.log, options)
    _report(result)
    assert result.compute is not None
    result.compute.save(args.output)
    print(f"wrote {args.output} ({len(result.compute.frame)} rows)")
    if args.comm_out is not None and result.comm is not None:
        result.comm.save(args.comm_out)
        print(f"wrote {args.comm_out} ({len(result.comm.frame)} rows)")
    print(f"{len(result.warnings)} warnings")
    return 0


def _run_manifest(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.manifest import run_manifest

    total_warnings = 0
    count = 0
    for entry, result, written in run_manifest(args.manifest, args.src, args.output):
        _report(result)
        total_warnings += len(result.warnings)
        count += 1
        outs = ", ".join(str(p) for p in written)
        print(f"{entry.file} -> {outs} ({len(result.warnings)} warnings)")
    print(f"imported {count} files ({total_warnings} warnings)")
    return 0
