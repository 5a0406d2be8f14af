"""``gradsched import nccl-tests|osu|bcaffe|manifest|kineto|pipedream|sailor``: logs -> traces.

Warnings go to stderr as ``warning: FILE line N: ...``; errors name the file, line and
field and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradsched.commands._args import integer, positive_int, real
from gradsched.commands._outputs import output_file, output_folder, output_prefix
from gradsched.errors import ConfigError
from gradsched.names import table_name
from gradsched.staging import Staging
from gradsched.traces.importers import ImportResult, source_named


def _provenance_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", help="provenance text (default: the file's '# source:')")
    parser.add_argument("--hardware", help="hardware text (default: the file's '# setup:')")
    parser.add_argument("--interconnect", help="interconnect text stored in the metadata")


def _add_nccl(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("nccl-tests", help="nccl-tests / rccl-tests stdout -> comm trace")
    p.add_argument("log", type=Path)
    p.add_argument("-o", "--output", type=output_file, required=True, help="output CSV")
    p.add_argument("--world-size", type=positive_int,
                   help="rank count (default: the 'Rank N' lines)")
    p.add_argument("--nodes", type=positive_int,
                   help="node count (default: distinct hosts of the 'Rank N' lines)")
    p.add_argument("--collective", help="collective (default: from the '*_perf' name)")
    p.add_argument("--backend", type=table_name,
                   help="backend (default: nccl, or rccl for rccl-tests)")
    p.add_argument("--error-tolerance", type=real(0.0, 1e300), default=1e-2,
                   help="largest accepted 'error' value in the old layout (default 1e-2)")
    _provenance_flags(p)
    p.set_defaults(func=_run_nccl)


def _add_osu(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("osu", help="OSU Micro-Benchmarks latency output -> comm trace")
    p.add_argument("log", type=Path)
    p.add_argument("-o", "--output", type=output_file, required=True, help="output CSV")
    p.add_argument("--world-size", type=positive_int, required=True, help="rank count")
    p.add_argument("--nodes", type=positive_int, required=True, help="node count")
    p.add_argument("--backend", default="mpi", type=table_name,
                   help="backend (default: mpi)")
    p.add_argument("--collective", help="collective (default: from the OSU title)")
    _provenance_flags(p)
    p.set_defaults(func=_run_osu)


def _add_bcaffe(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("bcaffe", help="B-Caffe per-blob dump -> compute (+ comm) trace")
    p.add_argument("log", type=Path)
    p.add_argument("-o", "--output", type=output_file, required=True, help="output compute CSV")
    p.add_argument("--comm-out", type=output_file, help="also write the per-size comm trace here")
    p.add_argument("--world-size", type=positive_int, required=True,
                   help="MPI rank count (B-Caffe: one rank per node)")
    p.add_argument("--nodes", type=positive_int, default=None,
                   help="node count (of the comm trace: needs --comm-out)")
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
    p.add_argument("-o", "--output", type=output_folder, required=True,
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
    _add_pipedream(isub)
    _add_sailor(isub)


def _add_kineto(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("kineto", help="PyTorch profiler (Kineto) JSON -> per-iteration and "
                        "per-collective CSVs")
    p.add_argument("traces", type=Path, nargs="+", help="TRACE.json or TRACE.json.gz, one "
                   "per rank")
    p.add_argument("-o", "--output", metavar="PREFIX",
                   type=output_prefix(".iterations.csv", ".collectives.csv", ".meta.json"),
                   help="writes PREFIX.iterations.csv, PREFIX.collectives.csv, "
                   "PREFIX.meta.json (required unless --compute-out)")
    p.add_argument("--no-clip", action="store_true",
                   help="keep CPU collective spans as recorded (default: clip each at the "
                   "end of its step and the next span on its thread)")
    _kineto_gpu_flags(p)
    p.set_defaults(func=_run_kineto)


def _kineto_gpu_flags(p: argparse.ArgumentParser) -> None:
    """The GPU path (gradsched.traces.importers.kineto_gpu): one step -> compute trace."""
    g = p.add_argument_group("GPU training trace -> per-gradient compute trace of one step")
    g.add_argument("--compute-out", type=output_file,
                   help="write the compute trace here (GPU path; "
                   "one trace file, or one .tar.gz of per-rank traces)")
    g.add_argument("--comm-out", type=output_file, help="also write the step's NCCL collectives "
                   "(all ranks, aligned) here")
    g.add_argument("--step", type=integer(0, 2**31),
                   help="ProfilerStep number (default: the lower-median step with a "
                   "backward, the first left out when there are 3 or more)")
    g.add_argument("--step-range", metavar="NAME",
                   help="steps are the record_function ranges NAME<N> / NAME#N (e.g. "
                   "gs:iteration) instead of ProfilerStep#N")
    g.add_argument("--rank", type=integer(0, 2**20),
                   help="rank of the compute trace (default: lowest)")
    g.add_argument("--params", help="parameter table CSV (name, numel[, bytes, "
                   "ready_order]), e.g. a compute trace of the same model: matched to the "
                   "trace's gradients row by row, on ready_order or by unique size")
    g.add_argument("--model", default="unknown")
    g.add_argument("--batch-size", type=positive_int,
                   help="when the input shapes of the step's first forward op (a convolution "
                   "or an embedding lookup) do not say it")
    g.add_argument("--world-size", type=positive_int)
    g.add_argument("--device", help="default: the trace's deviceProperties")
    g.add_argument("--source", help="provenance text stored in the metadata")
    g.add_argument("--host", action="store_true",
                   help="also write the host columns (host_forward_s, host_backward_s, "
                   "forward_launches, backward_launches: the launching thread's time per "
                   "layer) that `gradsched replay --host` uses")


def _run_kineto_gpu(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.kineto_gpu import Options, import_kineto_gpu

    if len(args.traces) != 1:
        raise ConfigError("--compute-out takes one trace file (or one .tar.gz of ranks)")
    for flag, given in (("-o/--output", args.output is not None), ("--no-clip", args.no_clip)):
        if given:  # the per-iteration import's settings
            raise ConfigError(f"{flag} is used only by the per-iteration import (without "
                              "--compute-out); the GPU path does not read it")
    options = Options(model=args.model, step=args.step, step_range=args.step_range,
                      rank=args.rank, params=args.params,
                      batch_size=args.batch_size, world_size=args.world_size,
                      device=args.device, source=args.source, host=args.host)
    with Staging() as stage:  # the compute trace and the comm record: both or neither
        compute_out = stage.file(args.compute_out)
        comm_out = stage.file(args.comm_out) if args.comm_out is not None else None
        with source_named(args.traces[0]):
            result = import_kineto_gpu(args.traces[0], options)
        _report(result)
        assert result.compute is not None
        result.compute.save(compute_out)
        if comm_out is not None and result.comm_record is not None:
            result.comm_record.save(comm_out)
    meta = result.compute.meta
    step = f"{args.step_range}{meta['step']}" if args.step_range else f"ProfilerStep#{meta['step']}"
    print(f"wrote {args.compute_out} ({step}, {result.compute.n_tensors} "
          f"gradients, forward {meta['forward_total_s'] * 1e3:.3f} ms, backward "
          f"{meta['backward_total_s'] * 1e3:.3f} ms, GPU busy {meta['gpu_busy_share']:.0%})")
    if args.comm_out is not None and result.comm_record is not None:
        print(f"wrote {args.comm_out} ({len(result.comm_record.frame)} collectives)")
    return 0


def _run_kineto(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.kineto import import_kineto

    if args.compute_out is not None:
        return _run_kineto_gpu(args)
    if args.output is None:
        raise ConfigError("give -o PREFIX (or --compute-out for a GPU training trace)")
    with Staging() as stage:  # PREFIX.iterations.csv, .collectives.csv, .meta.json
        prefix = Path(args.output)
        staged = stage.file(prefix)
        for flag, given in (("--comm-out", args.comm_out), ("--step-range", args.step_range),
                            ("--rank", args.rank), ("--params", args.params),
                            ("--batch-size", args.batch_size),
                            ("--world-size", args.world_size), ("--device", args.device),
                            ("--source", args.source), ("--model", args.model != "unknown"
                                                        or None),
                            ("--host", args.host or None)):
            if given is not None:  # --rank 0 is given too
                raise ConfigError(f"{flag} is used only with --compute-out (the GPU path); "
                                  "the per-iteration import does not read it")
        result = import_kineto(args.traces, clip_cpu_spans=not args.no_clip, step=args.step)
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        paths = [prefix.with_name(p.name) for p in result.write(staged)]
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
    with source_named(args.log):
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
    with source_named(args.log):
        result = import_osu(args.log, options)
    return _save_comm(result, args.output)


def _run_bcaffe(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.bcaffe import Options, import_bcaffe

    if args.comm_out is None:  # the compute trace records none of them
        for flag, given in (("--nodes", args.nodes), ("--hardware", args.hardware),
                            ("--interconnect", args.interconnect)):
            if given is not None:
                raise ConfigError(f"{flag} describes the comm trace: give --comm-out (the "
                                  "compute trace does not record it), or drop it")

    options = Options(
        world_size=args.world_size, nodes=args.nodes, model=args.model,
        batch_size=args.batch_size, device=args.device, source=args.source,
        hardware=args.hardware, with_comm=args.comm_out is not None,
    )
    if args.interconnect:
        options.interconnect = args.interconnect
    with Staging() as stage:  # the compute and comm traces: both or neither
        output = stage.file(args.output)
        comm_out = stage.file(args.comm_out) if args.comm_out is not None else None
        with source_named(args.log):
            result = import_bcaffe(args.log, options)
        _report(result)
        assert result.compute is not None
        result.compute.save(output)
        if comm_out is not None and result.comm is not None:
            result.comm.save(comm_out)
    print(f"wrote {args.output} ({len(result.compute.frame)} rows)")
    if args.comm_out is not None and result.comm is not None:
        print(f"wrote {args.comm_out} ({len(result.comm.frame)} rows)")
    print(f"{len(result.warnings)} warnings")
    return 0


def _run_manifest(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.manifest import run_manifest

    total_warnings = 0
    lines = []
    with Staging() as stage:  # every file of the manifest, or none
        staged = stage.folder(args.output)
        for entry, result, written in run_manifest(args.manifest, args.src, staged):
            _report(result)
            total_warnings += len(result.warnings)
            outs = ", ".join(str(args.output / p.relative_to(staged)) for p in written)
            lines.append(f"{entry.file} -> {outs} ({len(result.warnings)} warnings)")
    print("\n".join(lines))
    print(f"imported {len(lines)} files ({total_warnings} warnings)")
    return 0


def _add_pipedream(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("pipedream", help="PipeDream profiler graph.txt -> compute trace "
                        "(one row per module with parameters, DAG order)")
    p.add_argument("graph", type=Path, help="PipeDream graph.txt")
    p.add_argument("-o", "--output", type=output_file, required=True, help="output compute CSV")
    p.add_argument("--model", help="model name (default: the graph.txt's folder name)")
    p.add_argument("--image-size", type=positive_int, default=224,
                   help="input image side S: batch = Input bytes / (3 S S 4) (default 224)")
    p.add_argument("--batch-size", type=positive_int,
                   help="only for files whose activation sizes do not imply the batch size")
    p.add_argument("--source", help="provenance text stored in the metadata")
    p.set_defaults(func=_run_pipedream)


def _save_compute(result: ImportResult, output: Path) -> int:
    """Print the importer's warnings, write its compute trace and say so."""
    _report(result)
    assert result.compute is not None
    result.compute.save(output)
    trace = result.compute
    print(f"wrote {output} ({trace.n_tensors} rows, forward {trace.forward_total_s * 1e3:.3f} "
          f"ms, backward {trace.backward_total_s * 1e3:.3f} ms, {len(result.warnings)} "
          "warnings)")
    return 0


def _run_pipedream(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.pipedream import Options, import_pipedream

    options = Options(model=args.model, image_size=args.image_size,
                      batch_size=args.batch_size, source=args.source)
    with source_named(args.graph):
        result = import_pipedream(args.graph, options)
    return _save_compute(result, args.output)


def _add_sailor(isub: argparse._SubParsersAction) -> None:
    p = isub.add_parser("sailor", help="Sailor per-layer profile.json -> compute trace (one "
                        "row per transformer layer, plus embedding and head)")
    p.add_argument("profile", type=Path, help="profiles/<model>/<GPU>/profile.json")
    p.add_argument("-o", "--output", type=output_file, required=True, help="output compute CSV")
    p.add_argument("--model", help="OPT-350 or GPT-Neo-2.7 (default: the model folder)")
    p.add_argument("--micro-batch", type=positive_int, default=1,
                   help="which micro-batch entry of the profile (default 1)")
    p.add_argument("--tensor-parallel", type=positive_int, default=1,
                   help="which tensor-parallel entry; parameters are per rank (default 1)")
    p.add_argument("--seq-len", type=positive_int, default=2048,
                   help="sequence length recorded in the metadata (default 2048, Sailor's)")
    p.add_argument("--source", help="provenance text stored in the metadata")
    p.set_defaults(func=_run_sailor)


def _run_sailor(args: argparse.Namespace) -> int:
    from gradsched.traces.importers.sailor import Options, import_sailor

    options = Options(model=args.model, micro_batch=args.micro_batch,
                      tensor_parallel=args.tensor_parallel,
                      sequence_length=args.seq_len, source=args.source)
    with source_named(args.profile):
        result = import_sailor(args.profile, options)
    return _save_compute(result, args.output)
