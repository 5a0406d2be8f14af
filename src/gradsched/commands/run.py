"""``gradsched run``: re-execute plans for real (or PyTorch DDP itself) and time them.

Writes one row per timed iteration (``-o``) and a summary beside it
(``<stem>.summary.csv``: median, p10, p90 per run; for stock DDP with a per-bucket
``bucket_cap_mb_list`` also the number of buckets DDP rebuilt, ``ddp_buckets``, and for
``--ddp-caps-from`` whether they are the plan's, ``ddp_buckets_match``: if not, the
command fails after writing its outputs). See ``docs/executor.md``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from gradsched.commands._admit import Training, admit_training
from gradsched.commands._args import (
    add_grad_accum,
    add_oversubscribe,
    count,
    integer,
    non_negative_count,
    positive_int,
    positive_seconds,
    real,
    real_list,
    threads,
    world_size,
)
from gradsched.commands._outputs import output_file, output_folder
from gradsched.errors import ConfigError
from gradsched.io import write_csv_atomic
from gradsched.plan import Plan
from gradsched.staging import Staging


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run", help="time plans through the executor (or PyTorch DDP) on real ranks",
        description="Run K timed iterations (after W warm-up ones) of a model on P ranks, "
                    "executing each --plan with gradsched's executor and/or PyTorch DDP "
                    "itself (--baseline ddp, one run per --bucket-cap-mb, per "
                    "--bucket-cap-mb-list and per --ddp-caps-from plan).")
    run.add_argument("--plan", action="append", type=Path, default=[], metavar="PLAN.json",
                     help="plan JSON (repeatable); tensor names must be the model's "
                          "parameter names")
    run.add_argument("--baseline", choices=["ddp"], default=None,
                     help="also run PyTorch DistributedDataParallel itself")
    run.add_argument("--bucket-cap-mb", action="append", type=_cap, default=[],
                     help="DDP bucket cap in MiB for --baseline ddp (repeatable; default 25), "
                          "or 'default' for torch's default (bucket_cap_mb=None: 25 MiB "
                          "with a 1 MiB first bucket; an explicit cap is also the first "
                          "bucket's)")
    run.add_argument("--bucket-cap-mb-list", action="append", type=_CAP_LIST, default=[],
                     metavar="MB,MB,...",
                     help="one stock DDP run with bucket_cap_mb_list (MiB per bucket, the "
                          "last repeated; torch >= 2.14) for --baseline ddp (repeatable: one "
                          "run per list); needs --warmup >= 1 (DDP rebuilds its buckets "
                          "after the first iteration)")
    run.add_argument("--ddp-caps-from", action="append", type=Path, default=[],
                     metavar="PLAN.json",
                     help="one stock DDP run with the bucket_cap_mb_list that rebuilds this "
                          "contiguous plan's buckets (gradsched.planners.ddp_caps; needs "
                          "--compute and --baseline ddp; repeatable); the rebuilt buckets "
                          "are checked against the plan's (ddp_buckets_match)")
    run.add_argument("--compute", type=Path, default=None, metavar="TRACE.csv",
                     help="the compute trace the --ddp-caps-from plans were made for "
                          "(its gradient-ready order and tensor sizes)")
    run.add_argument("--model", required=True,
                     help="model name (gradsched.workloads: tiny-mlp, resnet50, gpt2, "
                          "..., or package.module:attr)")
    run.add_argument("--batch-size", type=positive_int, required=True, help="samples per rank")
    run.add_argument("--seq-len", type=positive_int, default=None, help="tokens per sample (text)")
    run.add_argument("--world-size", type=world_size, required=True, help="number of ranks")
    run.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    run.add_argument("--cluster", default=None, metavar="RATE",
                     help="run the ranks in emulated network namespaces shaped to RATE "
                          "(e.g. 1gbit; needs root)")
    run.add_argument("--ranks-per-node", type=integer(1, 4096), default=None,
                     help="ranks per node: the node layout of 'hierarchical' buckets and, "
                          "with --cluster, one namespace per node (its ranks unshaped "
                          "between them)")
    run.add_argument("--ps-servers", type=integer(0, 4096), default=0,
                     help="parameter-server runs: this many server ranks besides the "
                          "--world-size workers; every plan bucket must be 'ps'")
    run.add_argument("--iters", type=count, default=20, help="timed iterations")
    run.add_argument("--warmup", type=non_negative_count, default=5,
                     help="untimed iterations first")
    run.add_argument("--threads", type=threads, default=1,
                     help="intra-op threads per rank")
    run.add_argument("--seed", type=integer(0, 2**62), default=0)
    run.add_argument("--timeout-s", type=positive_seconds, default=300.0,
                     help="limit on every collective wait")
    run.add_argument("--profile", type=output_folder, default=None, metavar="DIR",
                     help="also profile 3 extra iterations per run (Chrome traces here)")
    add_oversubscribe(run)
    run.add_argument("--torchrun", action="store_true",
                     help="run under torchrun (multi-node): ranks from the environment "
                     "(RANK, WORLD_SIZE = --world-size); rank 0 writes the outputs")
    add_grad_accum(run, "a timed iteration is one optimizer step: the first K-1 backward "
                   "passes under no_sync() (executor and DDP), the K-th communicating, each "
                   "loss divided by K; the CSVs then carry a grad_accum column")
    run.add_argument("-o", "--output", type=output_file, required=True, help="per-iteration CSV")
    run.set_defaults(func=_run)


def _cap(text: str) -> float | None:
    """argparse type: a cap in MiB, or ``default`` (None: torch's default buckets)."""
    if text.strip().lower() == "default":
        return None
    return _CAP_MB(text)


_CAP_MB = real(0.0, 2**30, low_open=True, unit="MiB")
"""A DDP bucket cap: a finite number of MiB > 0 (at most 1 PiB)."""

_cap.__name__ = "number"  # a hardened number (or 'default')

_CAP_LIST = real_list(0.0, 2**30, low_open=True, unit="MiB", example="1,27,16",
                      what="bucket caps")
"""A ``bucket_cap_mb_list``: comma-separated finite numbers of MiB, each > 0."""


def _check_architecture(args: argparse.Namespace, plans: list[tuple[Path, Plan]]) -> None:
    """Parameter-server runs need all-'ps' plans and no DDP baseline; hierarchical buckets
    need --ranks-per-node dividing the world size."""
    from gradsched.errors import InputError

    for path, plan in plans:
        kinds = {b.algorithm for b in plan.buckets}
        if args.ps_servers and kinds != {"ps"}:
            raise InputError("with --ps-servers every bucket's algorithm must be 'ps'",
                             path=str(path), field="buckets.algorithm")
        if not args.ps_servers and "ps" in kinds:
            raise InputError("the plan has parameter-server buckets (algorithm 'ps'): give "
                             "--ps-servers", path=str(path), field="buckets.algorithm")
        if "hierarchical" in kinds and args.ranks_per_node is None:
            raise InputError("the plan has hierarchical buckets: give --ranks-per-node",
                             path=str(path), field="buckets.algorithm")
    if args.ps_servers and args.baseline == "ddp":
        raise ConfigError("--baseline ddp cannot run with --ps-servers")
    if args.ranks_per_node is not None and args.ps_servers:
        raise ConfigError("--ranks-per-node and --ps-servers cannot be combined")
    if args.ranks_per_node is not None and args.world_size % args.ranks_per_node:
        raise ConfigError(f"--world-size {args.world_size} is not a multiple of "
                          f"--ranks-per-node {args.ranks_per_node}")


def list_items(args: argparse.Namespace, trainable: dict[str, int] | None) -> list[Any]:
    """The stock-DDP runs with a per-bucket ``bucket_cap_mb_list``: one per
    ``--bucket-cap-mb-list`` and one per ``--ddp-caps-from`` plan (its caps from
    :func:`gradsched.planners.ddp_caps.ddp_caps`, which refuses a plan DDP cannot run)."""
    from gradsched.runtime.bench import RunItem

    if (args.bucket_cap_mb_list or args.ddp_caps_from) and args.baseline != "ddp":
        raise ConfigError("--bucket-cap-mb-list and --ddp-caps-from need --baseline ddp")
    if args.ddp_caps_from and args.compute is None:
        raise ConfigError("--ddp-caps-from needs --compute TRACE.csv (the trace the plan "
                          "was made for)")
    if args.compute is not None and not args.ddp_caps_from:
        raise ConfigError("--compute is used only with --ddp-caps-from")
    items = [RunItem(label="bucket_cap_mb_list=" + ",".join(f"{c:g}" for c in caps),
                     algorithm="ddp-list", bucket_cap_mb_list=list(caps))
             for caps in args.bucket_cap_mb_list]
    if not args.ddp_caps_from:
        return items
    from gradsched.errors import InputError
    from gradsched.planners.ddp_caps import ddp_caps
    from gradsched.runtime.prelaunch import check_plans
    from gradsched.traces.bundle import ComputeTrace

    trace = ComputeTrace.load(args.compute)
    for path in args.ddp_caps_from:
        plan = Plan.load(path)
        trainable = check_plans([(str(path), plan)], model=args.model,
                                batch_size=args.batch_size, seq_len=args.seq_len,
                                trainable=trainable)
        try:
            caps = ddp_caps(plan, trace)
        except InputError as exc:  # the refusal, naming the plan file
            raise InputError(exc.reason, path=str(path), field=exc.field) from None
        items.append(RunItem(label=f"ddp-caps-from={path}", algorithm="ddp-list",
                             bucket_cap_mb_list=list(caps.exact_mb),
                             expected_buckets=[list(b.tensors) for b in plan.buckets]))
    return items


def check_rebuilt(summary: Any) -> None:
    """A ``--ddp-caps-from`` run whose rebuilt buckets differ from its plan's is an error
    (exit code of :class:`~gradsched.errors.InputError`), raised after the outputs were
    written so that the timed run is kept; its summary row says ``ddp_buckets_match``
    False."""
    from gradsched.errors import InputError

    bad = summary.loc[summary["ddp_buckets_match"].map(lambda v: str(v) == "False")]
    if not bad.empty:
        row = bad.iloc[0]
        raise InputError(f"PyTorch DDP rebuilt {row['ddp_buckets']} buckets that differ "
                         f"from the plan's (run {row['plan']!r}): the measured run is not "
                         "the plan's schedule", field="ddp_buckets_match")


def summary_path(output: Path) -> Path:
    """``measured.csv`` -> ``measured.summary.csv``."""
    return output.with_name(output.stem + ".summary.csv")


def _run(args: argparse.Namespace) -> int:
    from gradsched.runtime.prelaunch import check_plans, check_torchrun_env

    if args.torchrun:  # before torch is loaded: one line, not a C++ stack or a long wait
        check_torchrun_env(world_size=args.world_size)
    from dataclasses import replace

    from gradsched.runtime.bench import RunItem, run_items
    from gradsched.runtime.rounds import Launch

    items = []
    plans = [(path, Plan.load(path)) for path in args.plan]
    if plans:  # before any rank starts
        trainable = check_plans([(str(p), plan) for p, plan in plans], model=args.model,
                                batch_size=args.batch_size, seq_len=args.seq_len)
    for path, plan in plans:
        plan.check_resources(args.world_size, source=str(path), numel=trainable)
        items.append(RunItem(label=str(path), algorithm=plan.algorithm, plan=plan.to_dict()))
    _check_architecture(args, plans)
    if args.bucket_cap_mb and args.baseline != "ddp":
        raise ConfigError("--bucket-cap-mb needs --baseline ddp")
    lists = list_items(args, trainable if plans else None)
    if args.baseline == "ddp":
        for cap in args.bucket_cap_mb or ([] if lists else [25.0]):
            if cap is not None and not cap > 0:
                raise ConfigError(f"--bucket-cap-mb must be > 0, got {cap}")
            label = "bucket_cap_mb=default" if cap is None else f"bucket_cap_mb={cap:g}"
            items.append(RunItem(label=label, algorithm="ddp-native", bucket_cap_mb=cap))
        items.extend(lists)
    if not items:
        raise ConfigError("nothing to run: give --plan and/or --baseline ddp")
    buffers = max((plan.buffer_bytes(args.world_size, numel=trainable) for _, plan in plans),
                  default=0)
    admit_training("run", Training(  # before any rank starts
        model=args.model, batch_size=args.batch_size, seq_len=args.seq_len,
        device="cuda" if args.backend == "nccl" else "cpu"),
        ranks=1 if args.torchrun else args.world_size + args.ps_servers,
        threads=args.threads, oversubscribe=args.oversubscribe,
        extra_bytes_per_rank=buffers)
    if args.torchrun:
        return _run_torchrun(args, items)
    # Outputs are checked writable before the timed run and written all or none after it
    # (otherwise an unwritable -o would lose a whole timed run at the final write).
    with Staging() as stage:
        output = stage.file(args.output)
        summary_out = stage.file(summary_path(args.output))
        profile = stage.folder(args.profile) if args.profile is not None else None
        timing = replace(_timing(args), ps_servers=args.ps_servers,
                         profile_dir=str(Path(profile).resolve()) if profile else None)
        launch = Launch(world_size=args.world_size, backend=args.backend,
                        threads=args.threads, cluster=args.cluster)
        frame, summary = run_items(items, timing, launch)
        write_csv_atomic(output, frame)
        write_csv_atomic(summary_out, summary)
    _print(args, summary)
    check_rebuilt(summary)
    return 0


def _timing(args: argparse.Namespace) -> Any:
    """The timing protocol the options describe (one round of every item), made once."""
    from gradsched.runtime.rounds import Timing

    return Timing(model=args.model, batch_size=args.batch_size, rounds=1, warmup=args.warmup,
                  iters=args.iters, seed=args.seed, seq_len=args.seq_len,
                  timeout_s=args.timeout_s, ranks_per_node=args.ranks_per_node,
                  grad_accum=args.grad_accum)


def _print(args: argparse.Namespace, summary: Any) -> None:
    print(summary[["algorithm", "plan", "median_s", "p10_s", "p90_s"]].to_string(
        index=False, float_format=lambda v: f"{v:.6g}"))
    print(f"-> {args.output} and {summary_path(args.output)}")


def _run_torchrun(args: argparse.Namespace, items: list[Any]) -> int:
    """Under torchrun: every rank times its share; rank 0 writes -o and the summary (the
    outputs were checked writable before the run, by every rank)."""
    from gradsched.runtime.bench import run_items_torchrun

    for flag, given in (("--cluster", args.cluster), ("--ps-servers", args.ps_servers),
                        ("--profile", args.profile)):
        if given:
            raise ConfigError(f"{flag} cannot be combined with --torchrun")
    env_world = os.environ.get("WORLD_SIZE")
    if env_world is not None and env_world != str(args.world_size):
        raise ConfigError(f"--world-size {args.world_size} but torchrun started "
                          f"WORLD_SIZE={env_world} ranks (nnodes x nproc-per-node)")
    frames = run_items_torchrun(items, _timing(args), backend=args.backend,
                                threads=args.threads)
    if frames is None:  # not rank 0
        return 0
    frame, summary = frames
    with Staging() as stage:
        output = stage.file(args.output)
        summary_out = stage.file(summary_path(args.output))
        write_csv_atomic(output, frame)
        write_csv_atomic(summary_out, summary)
    _print(args, summary)
    check_rebuilt(summary)
    return 0
