"""One rank: ``python -m gradsched.distributed.worker --task mod:fn ...`` (see launch.py).

Also runs under ``torchrun`` (no ``--rank``/``--master``: ``env://`` initialisation).

Started by the launcher (``--lifeline-fd``), a rank watches its launcher from its first
line on (:func:`gradsched.distributed.lifeline.watch_parent`): if the launcher dies
without cleaning up (SIGKILL), the rank removes the launcher's temporary directory
(``--workdir``) and exits with code 129 within about a second.

The task is a function of this package only (:func:`gradsched.names.package_task`); the
launcher starts the worker with ``python -P``, and the worker removes the working folder
from the import path when started without it (``torchrun``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from gradsched.distributed.lifeline import watch_parent
from gradsched.distributed.peer_loss import PEER_LOST, TASK_FAILED, lost_a_peer
from gradsched.distributed.rank_files import ERROR_LINE_CHARS, failure_path, result_name
from gradsched.errors import ConfigError, InputError
from gradsched.io import read_json
from gradsched.names import drop_implicit_cwd, package_task


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gradsched.distributed.worker")
    parser.add_argument("--task", required=True)
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument("--master", default=None, help="host:port of rank 0's store")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    parser.add_argument("--op-timeout-s", type=float, default=300.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--lifeline-fd", type=int, default=None,
                        help="read end of the launcher's lifeline pipe (end of file: the "
                        "launcher died; remove --workdir and exit)")
    return parser.parse_args(argv)


def load_task(name: str) -> Any:
    """``gradsched.module:function`` -> the function; anything outside the package is
    refused (SystemExit with the reason)."""
    try:
        package_task(name)
    except ConfigError as exc:
        raise SystemExit(f"gradsched.distributed.worker: {exc}") from None
    module_name, _, attr = name.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def init_group(*, backend: str = "gloo", threads: int = 1, op_timeout_s: float = 300.0,
               rank: int | None = None, world_size: int | None = None,
               master: str | None = None, init_timeout_s: float = 60.0) -> tuple[int, int]:
    """Initialise the process group with timeouts; return (rank, world_size).

    ``rank`` None: under ``torchrun`` (``env://``: RANK and WORLD_SIZE from the
    environment); otherwise ``world_size`` ranks meet at rank 0's TCP store ``master``
    (``host:port``) within ``init_timeout_s``. Collectives time out after ``op_timeout_s``.
    """
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    timeout = dt.timedelta(seconds=op_timeout_s)
    if rank is None:  # torchrun
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        _use_local_gpu(backend, rank)
        dist.init_process_group(backend, init_method="env://", timeout=timeout)
        return rank, world
    if world_size is None or master is None:
        raise ConfigError("init_group: a rank needs world_size and master (host:port)")
    _use_local_gpu(backend, rank)
    # The store connection honours the init timeout; collectives the op timeout.
    from torch.distributed import TCPStore

    host, port = master.rsplit(":", 1)
    store = TCPStore(host, int(port), world_size, is_master=(rank == 0),
                     timeout=dt.timedelta(seconds=init_timeout_s))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=timeout)
    return rank, world_size


def _use_local_gpu(backend: str, rank: int) -> None:
    """Under NCCL, bind this rank to its node-local GPU (``LOCAL_RANK``, else ``rank``)."""
    if backend == "nccl":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``, at most :data:`ERROR_LINE_CHARS` characters:
    what the launcher prints of a failed rank (a torch error's later lines are its C++
    frames, ``Exception raised from ...``)."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text[:ERROR_LINE_CHARS]


def record_failure(workdir: Path, rank: int | None, line: str) -> None:
    """Leave ``line`` for the launcher (started by it: ``rank`` known; under torchrun the
    command itself reports)."""
    if rank is None:
        return
    with contextlib.suppress(OSError):
        failure_path(workdir, rank).write_text(line, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    drop_implicit_cwd()
    args = _parse(argv)
    task = load_task(args.task)
    if args.lifeline_fd is not None:
        workdir = args.workdir
        watch_parent(lambda: shutil.rmtree(workdir, ignore_errors=True),
                     lifeline_fd=args.lifeline_fd)
    try:
        rank, world = init_group(
            backend=args.backend, threads=args.threads, op_timeout_s=args.op_timeout_s,
            rank=args.rank, world_size=args.world_size, master=args.master,
            init_timeout_s=args.init_timeout_s)
    except Exception as exc:
        print(f"rank {args.rank}: could not join the process group at {args.master}: {exc}",
              file=sys.stderr)
        record_failure(args.workdir, args.rank, "could not join the process group at "
                       f"{args.master}: {error_line(exc)}")
        return 3
    try:
        payload = read_json(args.workdir / "payload.json", missing="the launcher's payload "
                            "is missing")
    except InputError as exc:
        print(f"rank {rank}: {exc}", file=sys.stderr)
        return 5
    try:
        result = task(rank, world, payload)
    except Exception as exc:
        print(f"rank {rank}: task {args.task} failed:\n{traceback.format_exc()}", file=sys.stderr)
        record_failure(args.workdir, rank, error_line(exc))
        return PEER_LOST if lost_a_peer(exc) else TASK_FAILED
    import torch.distributed as dist

    out = args.workdir / result_name(rank)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result), encoding="utf-8")
    tmp.replace(out)
    dist.destroy_process_group()
    return 0


def exit_now(code: int) -> None:
    """End the rank with ``code`` once its result is written, without interpreter
    finalization: flush stdout and stderr, then ``os._exit``. Finalization would wait for
    any non-daemon thread a task left behind, and tears down C++ objects (gloo's worker
    threads, the TCP store) in an order that can abort the process with SIGABRT after the
    work is done (pytorch/pytorch#179291 describes gloo threads holding Python references
    at finalization); the launcher would then report a finished rank as failed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
