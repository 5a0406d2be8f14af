"""How busy the machine is apart from the measurement itself: the clocks every item of the
timing protocol (:mod:`gradsched.runtime.rounds`) is sampled with.

The load average cannot tell a measurement's own ranks from another job: two ranks on a
2-core machine read a load of ~2 whether or not anything else runs. What can be told
apart is CPU time. Over one measured item the machine's busy CPU time (``/proc/stat``:
user, nice, system, irq, softirq, steal) minus the CPU time of the measurement's own
ranks (``getrusage(RUSAGE_SELF)`` in each rank: every thread, gloo's included) is what
*something else* used: the launcher's polling, the kernel's work for the emulated
network (softirq time not charged to a rank), and any other job. Divided by the item's
wall time it is in cores; the re-execution flags an item at or above its limit
(:data:`gradsched.reexec.run.FOREIGN_LIMIT_CORES`).

Before the first round, :func:`busy_cores` samples the whole machine for a moment; the
protocol refuses to start when other work already uses more than the caller's limit
(``reexec run --allow-load`` measures anyway and the flags say so).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from gradsched.errors import InputError
from gradsched.procfs import pseudo_int, read_pseudo

PROC_STAT = Path("/proc/stat")
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest is in user)
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
               "guest_nice")  # proc(5), /proc/stat


@dataclass(frozen=True)
class CpuSample:
    """Machine-wide busy CPU seconds, this process's CPU seconds, and a monotonic time."""

    machine_busy_s: float | None  # None where /proc/stat cannot be read (not Linux)
    own_cpu_s: float
    at_s: float


def machine_busy_s(stat: Path = PROC_STAT) -> float | None:
    """Busy CPU seconds of the whole machine since boot (``/proc/stat``'s first line,
    ``cpu`` and at least the four fields user, nice, system, idle of proc(5)); None where
    the file cannot be read (not Linux). A first line of another shape or a field that is
    not a number raises :class:`~gradsched.errors.InputError` naming the file and field."""
    text = read_pseudo(stat)
    if text is None:
        return None
    first = text.split("\n", 1)[0].split()
    if len(first) < 5 or first[0] != "cpu":
        raise InputError("the first line is not the machine's 'cpu' line (cpu user nice "
                         "system idle ...)", path=stat, line=1)
    ticks = [pseudo_int(v, stat, f"cpu {_CPU_FIELDS[i] if i < len(_CPU_FIELDS) else i + 1}")
             for i, v in enumerate(first[1:])]
    hz = os.sysconf("SC_CLK_TCK")
    return sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks)) / hz


def own_cpu_s() -> float:
    """CPU seconds of this process, all its threads, user + system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sample() -> CpuSample:
    """The three clocks, read now."""
    return CpuSample(machine_busy_s(), own_cpu_s(), time.monotonic())


def foreign_cores(machine_start: CpuSample, machine_end: CpuSample,
                  ranks_cpu_s: float) -> float | None:
    """Cores used by anything but the ranks between two samples of one process:
    ``(machine busy time - the ranks' CPU time) / wall time``, never below 0
    (None without /proc/stat or for an empty interval)."""
    if machine_start.machine_busy_s is None or machine_end.machine_busy_s is None:
        return None
    wall = machine_end.at_s - machine_start.at_s
    if wall <= 0:
        return None
    busy = machine_end.machine_busy_s - machine_start.machine_busy_s
    return max(busy - ranks_cpu_s, 0.0) / wall


def busy_cores(seconds: float = 2.0) -> float | None:
    """Cores in use on the whole machine over the next ``seconds`` (this process sleeps)."""
    start = sample()
    time.sleep(seconds)
    end = sample()
    return foreign_cores(start, end, end.own_cpu_s - start.own_cpu_s)
