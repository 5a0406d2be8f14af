"""Processes recorded by the emulated cluster: a process is identified by its pid *and*
its start time (so a recycled pid is never mistaken for it), and stopped with SIGTERM, then
SIGKILL, together with whatever runs inside the cluster's namespaces."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Sequence
from typing import Any

from gradsched.distributed.netns import namespace_pids
from gradsched.procfs import process_stat

PID_MAX = 1 << 22
"""The largest process id Linux hands out (``PID_MAX_LIMIT``, ``include/linux/threads.h``)."""


def process_start_time(pid: int) -> str | None:
    """The start time (clock ticks since boot, as decimal digits) of ``pid``, or None if it
    does not exist (:func:`gradsched.procfs.process_stat`)."""
    stat = process_stat(pid)
    return None if stat is None else str(stat[1])


def _is_zombie(pid: int) -> bool:
    stat = process_stat(pid)
    return stat is None or stat[0] == "Z"


def still_running(proc: dict[str, Any]) -> bool:
    """Whether the recorded process ``{"pid", "start_time"}`` is still the same process."""
    pid = int(proc["pid"])
    return process_start_time(pid) == proc.get("start_time") and not _is_zombie(pid)


def _signal_all(pids: Iterable[int], groups: Iterable[int], sig: int) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_processes(recorded: Sequence[dict[str, Any]], names: Sequence[str]) -> None:
    """SIGTERM, then after 3 s SIGKILL: the recorded processes that are still the same
    processes (pid and start time; their process groups when they lead one) and whatever
    runs inside ``names`` (namespaces this cluster created: only its ranks and their
    children run there)."""
    me = os.getpid()
    live = [p for p in recorded if int(p["pid"]) != me and still_running(p)]
    groups = {int(p["pid"]) for p in live if _pgid(int(p["pid"])) == int(p["pid"])}
    groups.discard(os.getpgid(0))
    pids = {int(p["pid"]) for p in live} | {pid for n in names for pid in namespace_pids(n)}
    pids.discard(me)
    _signal_all(pids, groups, signal.SIGTERM)
    end = time.monotonic() + 3.0
    while pids and time.monotonic() < end:
        pids = {pid for pid in pids if not _is_zombie(pid)}
        time.sleep(0.05)
    _signal_all(pids, groups, signal.SIGKILL)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
