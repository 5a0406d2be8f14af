"""``gradsched cluster``: run ranks in an emulated cluster of network namespaces (root).

    gradsched cluster --world-size N --rate 1gbit [--keep-going] [--deadline-s S] -- COMMAND...
    gradsched cluster check --world-size 2 --rate 1gbit [--bytes 64M]
    gradsched cluster clean [RECORD.json | NAMESPACE ...]

The first form builds N network namespaces joined through a bridge, each rank's link
shaped to RATE with ``tc tbf`` (see :mod:`gradsched.distributed.cluster`), and runs COMMAND
once per rank inside its namespace with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (0),
``LOCAL_WORLD_SIZE`` (1), ``MASTER_ADDR`` (rank 0's address), ``MASTER_PORT``,
``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` set; ``{rank}`` in COMMAND is replaced by
the rank. Output lines are prefixed with ``[rank K]``. When a rank fails the others are
stopped (unless ``--keep-going``); the exit status is the first failing rank's. Everything
is torn down on every exit path. Each rank gets SIGTERM if this command dies without
cleaning up (SIGKILL): it runs through ``python -m gradsched.distributed.orphan_guard``, which
sets the parent-death signal and then executes COMMAND.

``check`` sets the cluster up, runs a large all-reduce through it and prints the measured
bus bandwidth against the shaped rate (exit 1 when it is outside 0.5-1.3x the rate).
``clean`` removes what a run killed with SIGKILL left behind, and only that: give it the
run's record file (``/run/gradsched/clusters/<prefix>.json``, named in the error a later
run with the same prefix gets) or exact namespace names listed in such a record. Without
arguments it lists the records and removes nothing. Names are never matched by prefix,
and nothing of a cluster whose process still runs is touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

from gradsched.commands._args import add_oversubscribe, count, port, positive_seconds, world_size
from gradsched.errors import ConfigError

CHECK_LOW, CHECK_HIGH = 0.5, 1.3


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "cluster", help="run a command per rank in an emulated cluster of network namespaces "
        "(needs root); 'cluster check' measures the shaped bandwidth",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_common(parser)
    parser.add_argument("--keep-going", action="store_true",
                        help="when a rank fails, let the others finish")
    parser.add_argument("--deadline-s", type=positive_seconds, default=3600.0,
                        help="stop every rank after this many seconds (default 3600)")
    parser.add_argument("--master-port", type=port, default=29500)
    add_oversubscribe(parser)
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="the command to run per rank, or 'check' / 'clean'")
    parser.set_defaults(func=_main)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--world-size", type=world_size, default=2,
                        help="number of ranks (namespaces)")
    parser.add_argument("--rate", default="1gbit",
                        help="link rate per rank and direction, tc units (100mbit, 1gbit, "
                        "10gbit); 'none' for unshaped veth links")


def _rate(text: str | None) -> str | None:
    return None if text is None or text.lower() == "none" else text


def _main(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv[:1] == ["check"]:
        return _check(argv[1:], args)
    if argv[:1] == ["clean"]:
        return _clean(argv[1:])
    if not argv:
        raise ConfigError("nothing to run: give '-- COMMAND ...', 'check' or 'clean'")
    return _run_command(argv, args)


# ----------------------------------------------------------------------------- run


def _run_command(command: list[str], args: argparse.Namespace) -> int:
    from gradsched.admission import check_ranks
    from gradsched.distributed.cluster import EmulatedCluster

    if args.deadline_s <= 0:
        raise ConfigError("--deadline-s must be positive")
    # before any namespace
    check_ranks("cluster", args.world_size, oversubscribe=args.oversubscribe)
    # namespaces named gs<pid>-*: this process's own (gradsched.distributed.cluster)
    with EmulatedCluster(args.world_size, _rate(args.rate)) as cluster:
        print(f"cluster: {cluster.describe()}; rank 0 at {cluster.master_addr}:"
              f"{args.master_port}", file=sys.stderr)
        procs: list[subprocess.Popen[bytes]] = []
        threads: list[threading.Thread] = []
        lock = threading.Lock()
        try:
            for rank in range(cluster.ranks):
                env = dict(os.environ)
                env.update(cluster.rank_env(rank))
                env.update({"RANK": str(rank), "WORLD_SIZE": str(cluster.ranks),
                            "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                            "GROUP_RANK": str(rank), "MASTER_ADDR": cluster.master_addr,
                            "MASTER_PORT": str(args.master_port)})
                cmd = [*cluster.prefix_for(rank), sys.executable, "-P", "-m",
                       "gradsched.distributed.orphan_guard", "--parent-pid", str(os.getpid()),
                       "--", *(part.replace("{rank}", str(rank)) for part in command)]
                try:
                    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as exc:
                    raise ConfigError(f"cannot start {command[0]!r}: {exc}") from exc
                procs.append(proc)
                cluster.record_process(proc.pid)
                assert proc.stdout is not None
                thread = threading.Thread(target=_pump, args=(proc.stdout, rank, lock),
                                          daemon=True)
                thread.start()
                threads.append(thread)
            return _supervise(procs, args.keep_going, args.deadline_s)
        finally:
            _stop(procs)
            for thread in threads:
                thread.join(timeout=2.0)


def _pump(stream: IO[bytes], rank: int, lock: threading.Lock) -> None:
    """Copy a rank's output to our stdout, each line prefixed with ``[rank K]``."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        with lock:
            print(f"[rank {rank}] {line}", flush=True)
    stream.close()


def _supervise(procs: list[subprocess.Popen[bytes]], keep_going: bool, timeout_s: float) -> int:
    end = time.monotonic() + timeout_s
    first_failure: tuple[int, int] | None = None
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0) and first_failure is None:
                first_failure = (rank, code)
                print(f"cluster: rank {rank} exited with code {code}"
                      + ("" if keep_going else "; stopping the other ranks"), file=sys.stderr)
                if not keep_going:
                    return code if code > 0 else 128 - code
        if all(c is not None for c in codes):
            if first_failure is not None:
                code = first_failure[1]
                return code if code > 0 else 128 - code
            return 0
        if time.monotonic() > end:
            running = [r for r, c in enumerate(codes) if c is None]
            print(f"cluster: ranks {running} still running after {timeout_s:g} s; stopping "
                  "them", file=sys.stderr)
            return 124
        time.sleep(0.05)


KILL_WAIT_S = 30.0
"""How long a SIGKILLed rank may take to go: one still entering its namespace (``ip netns
exec`` remounting /sys) sits in uninterruptible sleep until that finishes, which took over
5 s on a loaded 2-core machine."""


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM the ranks' process groups, then SIGKILL after 5 s; a rank that outlives even
    that is reported (the cluster's teardown still kills what runs in its namespaces)."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    end = time.monotonic() + 5.0
    for proc in procs:
        try:
            proc.wait(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                print(f"cluster: rank process {proc.pid} outlived SIGKILL by {KILL_WAIT_S:g} s",
                      file=sys.stderr)


# ----------------------------------------------------------------------------- check


def default_check_bytes(rate_bits: float | None, ranks: int) -> int:
    """An all-reduce size that takes about a second at the shaped rate (1-256 MiB)."""
    from gradsched.capture.sweep_settings import bus_factor

    if rate_bits is None:
        return 64 << 20
    factor = bus_factor("all_reduce", ranks) or 1.0
    target = rate_bits / 8 * 1.0 / factor
    size = 1 << 20
    while size * 2 <= min(target, 256 << 20):
        size *= 2
    return size


def _check(argv: list[str], outer: argparse.Namespace) -> int:
    from gradsched.capture.sweep import run_sweep
    from gradsched.capture.sweep_settings import SweepConfig
    from gradsched.distributed.cluster import ClusterLayout
    from gradsched.distributed.netns import list_namespaces
    from gradsched.distributed.shaping import parse_rate, rate_label
    from gradsched.units import parse_size

    parser = argparse.ArgumentParser(prog="gradsched cluster check")
    _add_common(parser)
    parser.add_argument("--bytes", default=None,
                        help="all-reduce size (default: about 1 s at the rate)")
    parser.add_argument("--iters", type=count, default=5)
    parser.add_argument("--oversubscribe", action="store_true", default=outer.oversubscribe,
                        help=argparse.SUPPRESS)
    parser.set_defaults(world_size=outer.world_size, rate=outer.rate)
    args = parser.parse_args(argv)
    rate = _rate(args.rate)
    if args.world_size < 2:
        raise ConfigError("check needs at least 2 ranks")
    if rate is None:
        raise ConfigError("check needs a shaped rate (not 'none')")
    prefix = f"gs{os.getpid()}-"  # as EmulatedCluster names its namespaces by default
    rate_bits = parse_rate(rate) if rate is not None else None
    nbytes = (parse_size(args.bytes) if args.bytes
              else default_check_bytes(rate_bits, args.world_size))
    config = SweepConfig(world_size=args.world_size, collectives=["all_reduce"],
                         min_bytes=nbytes, max_bytes=nbytes, iters=args.iters, warmup=2,
                         min_iters=args.iters, time_budget_s=1.0, cluster_rate=rate,
                         cluster_prefix=prefix,
                         oversubscribe=args.oversubscribe)
    print(f"cluster check: {args.world_size} ranks, links "
          f"{rate_label(rate_bits) if rate_bits else 'unshaped'}, all-reduce of {nbytes} bytes "
          f"x {args.iters}", flush=True)
    trace = run_sweep(config)
    row = trace.frame.iloc[0]
    ours = ClusterLayout(args.world_size, prefix).namespaces  # exact names, never a prefix match
    leftovers = [n for n in list_namespaces() if n in ours]
    shaped = rate_bits / 8
    busbw = float(row["busbw_Bps"])
    ratio = busbw / shaped
    print(f"  shaped rate     : {shaped / 1e6:10.2f} MB/s per link and direction "
          f"({rate_label(rate_bits)})")
    print(f"  all-reduce time : {float(row['time_s']):10.4f} s (median; min "
          f"{float(row['time_min_s']):.4f}, max {float(row['time_max_s']):.4f})")
    print(f"  measured busbw  : {busbw / 1e6:10.2f} MB/s = {ratio:.3f} x the shaped rate")
    print(f"  teardown        : {'ok' if not leftovers else 'LEFTOVERS ' + str(leftovers)}")
    if ratio > CHECK_HIGH:
        print(f"FAIL: faster than {CHECK_HIGH}x the shaped rate: the shaping is not in effect")
        return 1
    if ratio < CHECK_LOW:
        print(f"FAIL: below {CHECK_LOW}x the shaped rate: this machine cannot drive the links "
              "at that rate (CPU-bound or busy); use a lower rate")
        return 1
    print("ok: the measured bus bandwidth matches the shaping")
    return 0


def _clean(targets: list[str]) -> int:
    """``clean RECORD.json`` or ``clean NAME ...``: remove exactly that; no arguments:
    list the records (exit 2, nothing removed)."""
    from gradsched.distributed.cluster_record import (
        clean_names,
        clean_record,
        find_records,
        owner_alive,
    )
    from gradsched.distributed.netns import preflight

    preflight()
    if not targets:
        records = find_records()
        for path, record in records:
            if record is None:
                state = "unreadable"
            else:
                pid = record["owner"]["pid"]
                state = f"running (pid {pid})" if owner_alive(record) else f"left by pid {pid}"
            print(f"{path}: {state}")
        print(f"{len(records)} cluster record(s); nothing removed: give a record file or "
              "exact namespace names ('gradsched cluster clean RECORD.json | NAME ...')",
              file=sys.stderr)
        return 2
    if len(targets) == 1 and targets[0].endswith(".json"):
        removed = clean_record(targets[0])
    else:
        removed = clean_names(targets)
    print(f"removed {len(removed)} namespace(s)" + (": " + ", ".join(removed)
                                                    if removed else ""))
    return 0
