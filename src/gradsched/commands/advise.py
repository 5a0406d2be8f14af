"""gradsched advise: keep your DDP setting, or the one change worth making.

    gradsched advise --compute TRACE.csv --comm SWEEP.csv|MODEL.json|alpha-beta:...
                     (or --topology FILE [--topology-collective flat|hierarchical])
                     [--world-size P] [--caps 1,2,4,...] [--current-bucket-cap-mb MIB]
                     [--margin-pct M] [--interference JSON] [--plan-out plan.json]
                     [--json advice.json]
                     [--validate [--model NAME] [--batch-size B] [--rounds 3] [--iters 10]]

Predicted by replay, in this order, each recommended only when it beats what it is
compared with by more than the comm model's error margin (its held-out MAPE, or 5 %):
  1. the best uniform bucket_cap_mb, against your current setting (torch's default
     unless --current-bucket-cap-mb);
  2. per-bucket caps, DistributedDataParallel(model, bucket_cap_mb_list=[...]) (stock
     PyTorch >= 2.14), against the best uniform cap;
  3. the gradsched plan through its executor, against the better of 1 and 2.
Otherwise it says: keep your setting. Every predicted gain is printed with its band,
gain +- margin: the model's error band, not a statistical confidence interval.
--validate runs the candidates for real with stock DDP on this machine, in interleaved
rounds as the re-execution does, and prints bootstrap 95 % intervals of the measured
speedups (iterations resampled within rounds). With --grad-accum K every timed iteration
is one optimizer step of K micro-batches (the first K-1 under no_sync(), for stock DDP and
the plan's executor alike), compared with the replay's prediction of that step.

--sharded advises an FSDP2 layout instead (gradsched.experiments.recommend_sharded):
FSDP2's per-block default against the optimum of unit grouping, resharding and prefetch
under --memory-cap, the fully_shard calls to paste, and with --validate both run with
stock FSDP2 (with --grad-accum K: steps of K micro-batches, gradient sync off for the
first K-1).
--sharded --mesh compares device meshes instead (full sharding, reshard_after_forward =
GPUs per node, HSDP; gradsched.commands._advise_mesh) on --topology or an nccl --comm model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsched.commands._admit import Training, admit_training
from gradsched.commands._advise_mesh import add_mesh_option, run_mesh_advice
from gradsched.commands._args import (
    add_grad_accum,
    add_oversubscribe,
    integer,
    non_negative_count,
    positive_int,
    positive_seconds,
    real,
    real_list,
    size,
    threads,
    world_size,
)
from gradsched.commands._at_scale_note import print_at_scale_note
from gradsched.commands._dtypes import add_dtype_options, dtypes_of
from gradsched.commands._dtypes import given as dtype_option
from gradsched.commands._outputs import output_file
from gradsched.commands._overlap import add_overlap_option, sharded_overlap, with_overlap
from gradsched.commands._stragglers import add_stragglers, with_stragglers
from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.topology import load_topology
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.margin import DEFAULT_MARGIN_PCT
from gradsched.experiments.recommend import (
    DEFAULT_CAPS_MB,
    AdviceSettings,
    advise,
    resolve_world_size,
)
from gradsched.experiments.recommend_text import render
from gradsched.io import write_json_atomic
from gradsched.names import registry_model
from gradsched.reexec.config import load_interference
from gradsched.traces.bundle import ComputeTrace, meta_path
from gradsched.traces.forward import with_forward

COMM_HELP = ("comm sweep CSV (gradsched capture comm), fitted model JSON (gradsched fit -o), "
             "or alpha-beta:alpha=<seconds>,beta=<seconds per byte>")


DEFAULT_ITERATIONS = 5
"""Replay iterations of DDP's candidates unless --replay-iters says otherwise."""

VALIDATION_DEFAULTS: dict[str, int | float] = {"rounds": 3, "iters": 10, "warmup": 2,
                                               "threads": 1, "timeout_s": 300.0}
"""The --validate settings' defaults (refused without --validate, like every setting of
the validation: --model, --batch-size, --seq-len, --cluster, --oversubscribe)."""

_caps = real_list(0.0, 2**30, low_open=True, unit="MiB", example="1,5,25",
                  what="bucket caps must be numbers > 0 (MiB)")
"""DDP bucket caps: comma-separated finite numbers of MiB in (0, 2**30]."""
_cap = real(0.0, 2**30, low_open=True, unit="MiB")
"""One DDP bucket cap: a finite number of MiB in (0, 2**30]."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "advise", help="recommend DDP's bucket caps (uniform or per bucket), or a gradsched "
                       "plan, only where predicted to win by more than the model's error",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compute", required=True, type=Path,
                   help="compute trace CSV (gradsched capture compute, gradsched import "
                        "kineto)")
    p.add_argument("--comm", default=None, help=COMM_HELP + " (or --topology)")
    p.add_argument("--topology", type=Path, default=None, metavar="FILE",
                   help="two-level cluster JSON/YAML {nodes, ranks_per_node, intra, inter} "
                        "(docs/topology.md) instead of --comm; world size = nodes x ranks")
    p.add_argument("--topology-collective", choices=["flat", "hierarchical"], default=None,
                   help="with --topology: one ring over all ranks, or reduce-scatter/"
                        "all-reduce/all-gather by level (default hierarchical)")
    p.add_argument("--world-size", type=world_size, default=None,
                   help="number of ranks (default: the one world size the comm model holds)")
    p.add_argument("--caps", type=_caps, default=None, metavar="MIB,...",
                   help="DDP bucket_cap_mb grid swept besides torch's default (default "
                        + ",".join(f"{c:g}" for c in DEFAULT_CAPS_MB) + ")")
    p.add_argument("--current-bucket-cap-mb", type=_cap, default=None, metavar="MIB",
                   help="the bucket_cap_mb you run now (default: torch's default buckets)")
    p.add_argument("--margin-pct", type=real(0.0, 1e6), default=None,
                   help="predicted gain (percent) every change needs to be recommended "
                        "(default: the fitted model's held-out MAPE, else "
                        f"{DEFAULT_MARGIN_PCT:g})")
    p.add_argument("--interference", type=Path, default=None, metavar="JSON",
                   help="calibrated interference (gradsched reexec interference) for the "
                        "replay and the plan's scoring")
    p.add_argument("--replay-iters", type=integer(2, 10_000), default=None,
                   help="replay iterations of DDP's candidates (>= 2; default "
                        f"{DEFAULT_ITERATIONS})")
    p.add_argument("--forward-ratio", type=real(0.0, 10.0), default=None, metavar="R",
                   help="for a trace that did not measure forward: forward = R x backward "
                        "(default 0.5)")
    p.add_argument("--plan-out", type=output_file, default=None, metavar="PLAN.json",
                   help="also write the gradsched plan here (input of gradsched run; with "
                        "--sharded the recommended FSDP2 layout, input of gradsched shard run)")
    add_stragglers(p)
    p.add_argument("--json", type=output_file, default=None, metavar="PATH",
                   help="write the advice (and the validation) as JSON")
    add_overlap_option(p)
    p.add_argument("--backend", choices=["gloo", "nccl"], default=None,
                   help="backend of --validate and of the printed commands (default gloo; "
                        "not with --sharded, whose validation runs FSDP2 on gloo)")
    add_grad_accum(p, "advise compares what the replay predicts per step (DDP under "
                   "no_sync(), FSDP2 with gradient sync off); --validate times steps of K "
                   "micro-batches")
    sh = p.add_argument_group("sharded data parallelism (--sharded: FSDP2 layouts instead of DDP)")
    sh.add_argument("--sharded", action="store_true",
                    help="advise an FSDP2 layout (units, resharding, prefetch) instead of DDP's "
                         "buckets: FSDP2's per-block default against the optimum")
    sh.add_argument("--semantics", choices=["streams", "blocking"], default=None,
                    help="streams (GPU: collectives on their own streams) or blocking (FSDP2 on "
                         "CPU with gloo); default: blocking for a CPU trace, else streams")
    sh.add_argument("--memory-cap", type=size(), default=None, metavar="BYTES",
                    help="cap on gathered parameters and unsharded gradients per rank "
                         "(e.g. 600M)")
    sh.add_argument("--gpu-memory", type=size(), default=None, metavar="BYTES",
                    help="memory of one GPU (e.g. 80G); no layout gathers more than it leaves "
                         "after the parameter, gradient and Adam-state shards; default: the "
                         "trace's device when it names a known GPU")
    add_dtype_options(sh)
    add_mesh_option(sh)  # --mesh: FSDP vs HSDP vs integer resharding (commands/_advise_mesh)
    val = p.add_argument_group("validation (--validate: run the candidates for real)")
    val.add_argument("--validate", action="store_true",
                     help="run stock DDP with the per-bucket caps, the best uniform cap and "
                          "your setting (and the plan, if recommended) on --world-size local "
                          "ranks; print the measured speedups with bootstrap 95 %% intervals")
    val.add_argument("--model", default=None,
                     help="model to run: a gradsched.workloads name, or package.module:attr "
                          "of an installed module or one on PYTHONPATH (never the working "
                          "folder) (default: the trace's meta 'model', a zoo name only)")
    val.add_argument("--batch-size", type=positive_int, default=None,
                     help="samples per rank (default: the trace's meta 'batch_size')")
    val.add_argument("--seq-len", type=positive_int, default=None,
                     help="tokens per sample (default: the trace's meta 'seq_len')")
    val.add_argument("--rounds", type=positive_int, default=None,
                     help="rounds; each runs every candidate once, in a seeded random order "
                          f"(default {VALIDATION_DEFAULTS['rounds']})")
    val.add_argument("--iters", type=positive_int, default=None,
                     help="timed iterations per run (>= 2; default "
                          f"{VALIDATION_DEFAULTS['iters']})")
    val.add_argument("--warmup", type=non_negative_count, default=None,
                     help="untimed iterations per run first (default "
                          f"{VALIDATION_DEFAULTS['warmup']})")
    val.add_argument("--threads", type=threads, default=None,
                     help="intra-op threads per rank (default "
                          f"{VALIDATION_DEFAULTS['threads']})")
    val.add_argument("--timeout-s", type=positive_seconds, default=None,
                     help="limit on every collective wait (default "
                          f"{VALIDATION_DEFAULTS['timeout_s']:g})")
    val.add_argument("--cluster", default=None, metavar="RATE",
                     help="run the ranks in emulated network namespaces shaped to RATE "
                          "(e.g. 1gbit, as gradsched run; needs root)")
    add_oversubscribe(val)
    p.set_defaults(func=_run)


def _load(args: argparse.Namespace) -> tuple[object, object, int, dict[str, float]]:
    if not args.compute.is_file():
        raise InputError("compute trace not found", path=args.compute)
    trace = with_forward(ComputeTrace.load(args.compute), args.forward_ratio)
    model, spec = _comm_model(args)
    world = resolve_world_size(trace, model, args.world_size, trace_path=str(args.compute),
                               comm_spec=spec, topology=args.topology is not None)
    trace = with_stragglers(args, trace, world)
    print_at_scale_note(args, trace, world, "advise")
    interference: dict[str, float] = {}
    if args.interference is not None:
        interference = dict(load_interference(args.interference)[0])
    return trace, model, world, interference


def _comm_model(args: argparse.Namespace) -> tuple[object, str]:
    """The ``--comm`` model, or the ``--topology``'s collective model (exactly one), and
    the spec that names it."""
    if (args.comm is None) == (args.topology is None):
        raise ConfigError("give exactly one of --comm and --topology")
    if args.topology is None:
        if args.topology_collective is not None:
            raise ConfigError("--topology-collective needs --topology")
        if not args.comm.startswith("alpha-beta:") and not Path(args.comm).is_file():
            raise InputError("comm sweep or model not found", path=args.comm)
        return load_comm_spec(args.comm), args.comm
    collective = args.topology_collective or "hierarchical"
    return load_topology(args.topology).collective_model(collective), str(args.topology)


def _validation_settings(args: argparse.Namespace) -> None:
    """The settings of --validate: refused without it (nothing would read them), else
    their defaults filled in."""
    names = ("model", "batch_size", "seq_len", "cluster", *VALIDATION_DEFAULTS)
    given = [name for name in names if getattr(args, name) is not None]
    if args.oversubscribe:
        given.append("oversubscribe")
    if given and not args.validate:
        raise ConfigError(f"--{given[0].replace('_', '-')} is a setting of --validate (the "
                          "measured runs): give --validate, or drop it")
    for name, value in VALIDATION_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _run(args: argparse.Namespace) -> int:
    _validation_settings(args)
    trace, model, world, interference = _load(args)
    if args.mesh and not args.sharded:
        raise ConfigError("--mesh needs --sharded")
    if args.sharded and args.mesh:
        return run_mesh_advice(args, trace, model, world)
    if args.sharded:
        return _run_sharded(args, trace, model, world)
    args.replay_iters = args.replay_iters or DEFAULT_ITERATIONS
    args.backend = args.backend or "gloo"
    if args.memory_cap is not None or args.semantics is not None or args.gpu_memory is not None:
        raise ConfigError("--memory-cap, --gpu-memory and --semantics need --sharded")
    if dtype_option(args) is not None:
        raise ConfigError(f"{dtype_option(args)} sets the dtypes of FSDP2's collectives: it "
                          "needs --sharded")
    if args.validate and args.model is None and trace.meta.get("model"):
        # the sidecar's model: a zoo name only (data never selects code), checked before
        # any work
        registry_model(trace.meta["model"], path=meta_path(args.compute), field="model")
    topology = args.topology is not None
    interference = with_overlap(args, trace.meta, "advise", interference,  # type: ignore[attr-defined]
                                given="--interference" if args.interference else None)
    settings = AdviceSettings(
        compute=str(args.compute), comm=str(args.topology) if topology else args.comm,
        caps_mb=args.caps if args.caps is not None else DEFAULT_CAPS_MB,
        interference=interference, iterations=args.replay_iters, margin_pct=args.margin_pct,
        forward_ratio=args.forward_ratio,
        topology_collective=(args.topology_collective or "hierarchical") if topology else None,
        current_cap_mb=args.current_bucket_cap_mb, grad_accum=args.grad_accum)
    rec = advise(trace, model, world, settings)  # type: ignore[arg-type]
    hint = None if args.validate else "to measure it here: add --validate"
    print(render(rec, plan_out=str(args.plan_out) if args.plan_out else None,
                 backend=args.backend, validate_hint=hint), end="")
    out = rec.to_dict()
    if args.validate:
        model_name = args.model or rec.model_name
        batch = args.batch_size or rec.batch_size
        if not model_name or not batch:
            raise ConfigError("--validate needs --model and --batch-size (the trace's meta "
                              "names no model or batch size)")
        seq_len = args.seq_len or rec.seq_len
        if args.batch_size is None:  # the sidecar's: input, not a trusted setting
            batch = _batch_size(batch, args.compute)
        # the trace's batch size and the world size are requests like any option: admitted
        # before the model is built or a rank starts
        admit_training("advise --validate", Training(
            model=str(model_name), batch_size=batch, seq_len=seq_len,
            device="cuda" if args.backend == "nccl" else "cpu"),
            ranks=rec.world_size, threads=args.threads,
            oversubscribe=args.oversubscribe,
            extra_bytes_per_rank=rec.plan.buffer_bytes(rec.world_size))
        from gradsched.reexec.validate import (  # imports torch
            predicted_s,
            render_validation,
            validate,
        )
        from gradsched.runtime.rounds import Launch, Timing

        result = validate(rec, Timing(model=str(model_name), batch_size=int(batch),
                                      rounds=args.rounds, warmup=args.warmup, iters=args.iters,
                                      seq_len=seq_len, timeout_s=args.timeout_s),
                          Launch(world_size=rec.world_size, backend=args.backend,
                                 threads=args.threads, cluster=args.cluster))
        print(render_validation(rec, result), end="")
        predicted = {k: v for k, v in predicted_s(rec).items() if k in result.times}
        out["validation"] = result.to_dict() | {"model": model_name, "batch_size": batch,
                                                "predicted_s": predicted}
    if args.plan_out is not None:  # after a validation: nothing written when it fails
        rec.plan.save(args.plan_out)
        print(f"-> {args.plan_out}")
    if args.json is not None:
        write_json_atomic(args.json, out)
        print(f"-> {args.json}")
    return 0


def _run_sharded(args: argparse.Namespace, trace: object, model: object, world: int) -> int:
    from gradsched.experiments.recommend_sharded import advise_sharded, render_sharded
    from gradsched.experiments.sharded.common import ShardedProblem

    if args.topology is not None:
        raise ConfigError("--sharded takes --comm, not --topology")
    for flag, given in (("--caps", args.caps), ("--interference", args.interference),
                        ("--current-bucket-cap-mb", args.current_bucket_cap_mb),
                        ("--replay-iters", args.replay_iters), ("--backend", args.backend)):
        if given is not None:  # DDP's settings: an FSDP2 layout has no buckets to cap
            raise ConfigError(f"{flag} is a DDP setting; --sharded advises FSDP2 units and "
                              "does not read it (drop one of them)")
    device = str(trace.meta.get("device", ""))  # type: ignore[attr-defined]
    semantics = args.semantics or ("blocking" if device.startswith("cpu") else "streams")
    problem = ShardedProblem(
        trace, model, world, semantics=semantics,  # type: ignore[arg-type]
        memory_cap_bytes=args.memory_cap, grad_accum=args.grad_accum,
        compute_slowdown=sharded_overlap(args, trace.meta,  # type: ignore[attr-defined]
                                         "advise --sharded", semantics),
        mixed_precision=dtypes_of(args, trace))
    adv = advise_sharded(problem, args.comm, margin_pct=args.margin_pct,
                         gpu_memory_bytes=args.gpu_memory)
    print(render_sharded(adv, full_listing=args.plan_out is not None), end="")
    out = {"sharded": adv.to_dict()}
    if args.validate:
        model_name = args.model or trace.meta.get("model")  # type: ignore[attr-defined]
        batch = args.batch_size or trace.meta.get("batch_size")  # type: ignore[attr-defined]
        if not model_name or not batch:
            raise ConfigError("--validate needs --model and --batch-size (the trace's meta "
                              "names no model or batch size)")
        if args.model is None:
            registry_model(str(model_name), path=meta_path(args.compute), field="model")
        if args.batch_size is None:
            batch = _batch_size(batch, args.compute)
        admit_training("advise --sharded --validate", Training(
            model=str(model_name), batch_size=int(batch), seq_len=args.seq_len),
            ranks=world, threads=args.threads, oversubscribe=args.oversubscribe)
        from gradsched.reexec.validate import (  # imports torch
            render_sharded_validation,
            validate_sharded,
        )
        from gradsched.runtime.rounds import Launch, Timing

        timing = Timing(model=str(model_name), batch_size=int(batch), rounds=args.rounds,
                        warmup=max(args.warmup, 1), iters=max(args.iters, 2),
                        seq_len=args.seq_len, timeout_s=args.timeout_s,
                        grad_accum=args.grad_accum)
        result = validate_sharded(adv, timing, Launch(world_size=adv.world_size,
                                                      cluster=args.cluster),
                                  source=str(args.compute))
        print(render_sharded_validation(result), end="")
        out["validation"] = result
    if args.plan_out is not None:  # the recommended layout, input of gradsched shard run;
        adv.chosen.save(args.plan_out)  # after a validation: nothing written when it fails
        print(f"-> {args.plan_out} ({adv.chosen.algorithm}: gradsched shard run --plan "
              f"{args.plan_out})")
    if args.json is not None:
        write_json_atomic(args.json, out)
        print(f"-> {args.json}")
    return 0


def _batch_size(value: object, compute: Path) -> int:
    """The batch size to validate with: ``--batch-size`` or the trace sidecar's, which must
    be a whole number in ``[1, 2**20]`` (a sidecar is input, not a trusted setting)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
            or not 1 <= value <= 2**20:
        raise InputError(f"batch_size {value!r} is not a whole number in [1, {2**20}]: give "
                         "--batch-size", path=compute, field="meta.batch_size")
    return int(value)
