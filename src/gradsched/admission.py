"""Resource admission: what a command asks of this machine, checked before anything starts.

Every command that starts ranks or allocates large buffers (``capture``, ``run``,
``bench collectives``, ``compress train/profile``, ``reexec run/interference``,
``advise --validate``) asks this module first, so that an impossible request fails with
one line instead of filling the process table, the OOM killer's log ("exit -9 (no
output)") or the disk. Every refusal is a :class:`ResourceError` with one message format::

    <what>: asks for <request>; this machine has <capacity>; <how to proceed>

What is checked (``docs/errors.md``, "Resources checked before launch"):

* **ranks** (:func:`check_ranks`): local ranks x threads per rank against the CPUs this
  process may run on (affinity), at most :data:`OVERSUBSCRIPTION` times over unless the
  command's ``--oversubscribe`` is given; and, always, the processes the ranks need against
  the process limits (``RLIMIT_NPROC`` for non-root users, the ``pids`` cgroup);
* **memory** (:func:`check_memory`): an estimate of the bytes the ranks will hold against
  the memory available (``MemAvailable``, and the memory cgroup's headroom);
* **inputs** (:func:`check_input_size`, :func:`gunzip_bounded`): an input file's size, and
  a compressed input's decompressed size, read in bounded pieces (a small gzip file that
  inflates to gigabytes stops at the bound, never allocates the rest);
* **points** (:func:`check_points`): the number of measurements of a sweep.

Only the standard library: the checks run before torch is imported.
"""

from __future__ import annotations

import os
import resource
import zlib
from pathlib import Path

from gradsched.errors import ConfigError, InputError
from gradsched.io import INPUT_LIMIT_ENV, MAX_INPUT_BYTES, max_input_bytes
from gradsched.procfs import pseudo_int, read_pseudo, read_pseudo_int

OVERSUBSCRIPTION = 4
"""Most threads (ranks x threads per rank) per usable CPU without ``--oversubscribe``:
beyond it ranks time each other's descheduling, not the collectives."""

PROCESSES_PER_RANK = 8
"""Tasks (threads count against ``pids.max`` and ``RLIMIT_NPROC``) one rank needs besides
its intra-op threads: the interpreter, gloo's and torch's helper threads."""

RANK_BASE_BYTES = 256 << 20
"""Resident memory of one rank before its data: a Python interpreter with torch loaded."""

MEMORY_HEADROOM = 0.9
"""Fraction of the available memory a run may plan to use (the rest is for the page cache,
the launcher and estimation error)."""

JSON_EXPANSION = 8
"""Memory a parsed JSON document takes per byte of its text (Python objects), about."""

MAX_SWEEP_POINTS = 10_000
"""Most measurement points (sizes x collectives x algorithms x world sizes) of one sweep."""

_CHUNK = 1 << 20

PROC_MEMINFO = Path("/proc/meminfo")
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_THREADS_MAX = Path("/proc/sys/kernel/threads-max")
"""The kernel files the checks read (:mod:`gradsched.procfs`: absent means no bound; a
value that is not a number is an error naming the file and field)."""


class ResourceError(ConfigError):
    """A request this machine cannot serve, refused before anything started (exit 2)."""

    def __init__(self, what: str, asked: str, has: str, proceed: str) -> None:
        self.what, self.asked, self.has, self.proceed = what, asked, has, proceed
        super().__init__(f"{what}: asks for {asked}; this machine has {has}; {proceed}")


def _gib(n: float) -> str:
    if n >= 1000 << 30:
        return f"{n / (1 << 30):,.0f} GiB"
    if n >= 1 << 30:
        return f"{n / (1 << 30):.3g} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g} MiB"
    return f"{int(n)} bytes"


# ----------------------------------------------------------------------------- the machine


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), else ``os.cpu_count()``, else 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cgroup_dirs(controller: str) -> list[Path]:
    """This process's cgroup folders for ``controller`` (v2 unified and v1), innermost first
    and their parents after them (a parent's limit binds too)."""
    out: list[Path] = []
    text = read_pseudo(PROC_CGROUP)
    if text is None:  # not Linux, or no cgroups: no cgroup bound
        return out
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].startswith("/"):
            raise InputError("not a cgroup line (ID:CONTROLLERS:/PATH, cgroups(7))",
                             path=PROC_CGROUP, line=number)
        _, names, rel = parts
        if names == "":
            base = Path("/sys/fs/cgroup")
            if not (base / "cgroup.controllers").is_file():
                base = Path("/sys/fs/cgroup/unified")
        elif controller in names.split(","):
            base = Path("/sys/fs/cgroup") / names
        else:
            continue
        here = base / rel.lstrip("/")
        while True:
            out.append(here)
            if here == base:
                break
            here = here.parent
    return out


def cgroup_headroom(controller: str) -> int | None:
    """Room left under this process's cgroup limit (the tightest over its ancestors):
    ``pids`` in tasks, ``memory`` in bytes; None when no limit applies or none is readable."""
    names = {"pids": [("pids.max", "pids.current")],
             "memory": [("memory.max", "memory.current"),
                        ("memory.limit_in_bytes", "memory.usage_in_bytes")]}[controller]
    best: int | None = None
    for folder in _cgroup_dirs(controller):
        for limit_name, used_name in names:
            limit = read_pseudo_int(folder / limit_name, unlimited="max")
            if limit is None or limit >= 1 << 60:
                continue
            room = max(limit - (read_pseudo_int(folder / used_name) or 0), 0)
            best = room if best is None else min(best, room)
    return best


def process_headroom() -> tuple[int | None, str]:
    """(tasks this process may still start, where the bound comes from); None: unbounded."""
    bounds: list[tuple[int, str]] = []
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.geteuid() != 0:  # root is exempt
        bounds.append((max(soft - _user_tasks(), 0), f"RLIMIT_NPROC {soft} (ulimit -u)"))
    pids = cgroup_headroom("pids")
    if pids is not None:
        bounds.append((pids, "the pids cgroup's pids.max"))
    threads_max = read_pseudo_int(PROC_THREADS_MAX)
    if threads_max is not None:
        bounds.append((threads_max, "kernel.threads-max"))
    if not bounds:
        return None, "no process limit"
    return min(bounds)


def _user_tasks() -> int:
    """Tasks (threads) of this user now: what RLIMIT_NPROC counts."""
    uid, count = os.getuid(), 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}")
            if st.st_uid == uid:
                count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue
    return count


def mem_available(meminfo: Path) -> int | None:
    """``MemAvailable`` of ``meminfo`` (``/proc/meminfo``, proc(5): ``MemAvailable:  N kB``)
    in bytes; None when the file is absent or has no such line (kernels before 3.14). A
    line of another shape raises :class:`~gradsched.errors.InputError` naming the field."""
    text = read_pseudo(meminfo)
    for line in (text or "").splitlines():
        name, _, value = line.partition(":")
        if name == "MemAvailable":
            parts = value.split()
            if len(parts) != 2 or parts[1] != "kB":
                raise InputError(f"{value.strip()[:40]!r} is not 'N kB'", path=meminfo,
                                 field="MemAvailable")
            return pseudo_int(parts[0], meminfo, "MemAvailable") * 1024
    return None


def available_memory() -> tuple[int | None, str]:
    """(bytes this process may still allocate, where the bound comes from): ``MemAvailable``
    and the memory cgroup's headroom, the smaller; None where neither can be read."""
    bounds: list[tuple[int, str]] = []
    available = mem_available(PROC_MEMINFO)
    if available is not None:
        bounds.append((available, "MemAvailable"))
    room = cgroup_headroom("memory")
    if room is not None:
        bounds.append((room, "the memory cgroup's limit"))
    if not bounds:
        return None, "unknown"
    return min(bounds)


# ----------------------------------------------------------------------------- checks


def check_ranks(what: str, ranks: int, threads: int = 1, *, oversubscribe: bool = False,
                option: str = "--oversubscribe") -> None:
    """Refuse ``ranks`` local ranks of ``threads`` threads each when they exceed the usable
    CPUs more than :data:`OVERSUBSCRIPTION` times (unless ``oversubscribe``) or the tasks
    the process limits leave (always)."""
    cpus = usable_cpus()
    wanted = ranks * threads
    if not oversubscribe and wanted > OVERSUBSCRIPTION * cpus:
        raise ResourceError(
            what, f"{ranks} local ranks x {threads} threads = {wanted} threads",
            f"{cpus} usable CPUs (at most {OVERSUBSCRIPTION} threads per CPU without "
            f"{option})",
            f"use fewer ranks or threads per rank, or give {option} to run them anyway")
    tasks = ranks * (threads + PROCESSES_PER_RANK)
    room, source = process_headroom()
    if room is not None and tasks > room:
        raise ResourceError(
            what, f"{ranks} local ranks, about {tasks} tasks ({threads} + "
            f"{PROCESSES_PER_RANK} per rank)", f"room for {room} more tasks ({source})",
            "use fewer ranks or threads, or raise the limit; no override: the ranks "
            "could not start")


def check_memory(what: str, per_rank_bytes: float, ranks: int = 1, *, detail: str = "",
                 proceed: str = "use fewer ranks, a smaller batch or smaller messages") -> None:
    """Refuse when ``ranks`` x (:data:`RANK_BASE_BYTES` + ``per_rank_bytes``) exceeds
    :data:`MEMORY_HEADROOM` of the available memory (:func:`available_memory`)."""
    total = ranks * (RANK_BASE_BYTES + per_rank_bytes)
    memory, source = available_memory()
    if memory is None or total <= MEMORY_HEADROOM * memory:
        return
    how = f" ({detail})" if detail else ""
    raise ResourceError(
        what, f"about {_gib(total)} on {ranks} rank(s){how}",
        f"{_gib(memory)} available ({source}; at most {MEMORY_HEADROOM:.0%} of it is used)",
        proceed)


def check_points(what: str, points: int, limit: int = MAX_SWEEP_POINTS, *,
                 proceed: str = "narrow the size range, raise the growth factor or measure "
                               "fewer collectives") -> None:
    """Refuse a sweep of more than ``limit`` measurement points."""
    if points > limit:
        raise ResourceError(what, f"{points} measurement points",
                            f"a bound of {limit} points per sweep", proceed)


def input_limit() -> int:
    """Bytes one input may hold once decompressed: :data:`MAX_INPUT_BYTES` (or
    ``$GRADSCHED_MAX_INPUT_BYTES``), and at most the available memory over
    :data:`JSON_EXPANSION`."""
    limit = max_input_bytes()
    memory, _ = available_memory()
    if memory is not None:
        limit = min(limit, max(memory // JSON_EXPANSION, 1))
    return limit


def _input_error(path: str | Path, asked: str, limit: int) -> ResourceError:
    return ResourceError(
        str(path), asked, f"a bound of {_gib(limit)} per input (${INPUT_LIMIT_ENV}, and "
        f"1/{JSON_EXPANSION} of the available memory)",
        f"split the input (one trace per rank or step), or raise ${INPUT_LIMIT_ENV} if "
        "the input is genuine and the memory suffices")


def check_input_size(path: str | Path, limit: int | None = None) -> int:
    """The size of file ``path``, refused beyond :func:`input_limit` before it is read."""
    limit = input_limit() if limit is None else limit
    size = Path(path).stat().st_size
    if size > limit:
        raise _input_error(path, f"reading {_gib(size)}", limit)
    return size


def gunzip_bounded(raw: bytes, label: str | Path, limit: int | None = None) -> bytes:
    """Decompress gzip data (every member of a multi-member stream) in bounded pieces; more
    than ``limit`` (default :func:`input_limit`) decompressed bytes raise
    :class:`ResourceError` as soon as the bound is passed. Corrupt data raises ``zlib.error``
    or ``EOFError`` (the caller names it)."""
    limit = input_limit() if limit is None else limit
    out = bytearray()
    data = raw
    while data:
        inflater = zlib.decompressobj(wbits=31)
        pending = data
        while pending and not inflater.eof:
            room = limit - len(out) + 1
            out += inflater.decompress(pending, min(room, _CHUNK))
            if len(out) > limit:
                raise _input_error(label, f"more than {_gib(limit)} once decompressed "
                                   f"(from {_gib(len(raw))} of gzip)", limit)
            pending = inflater.unconsumed_tail
        if not inflater.eof:
            while not inflater.eof:  # flush what the input already holds
                piece = inflater.decompress(b"", min(limit - len(out) + 1, _CHUNK))
                if not piece:
                    break
                out += piece
                if len(out) > limit:
                    raise _input_error(label, f"more than {_gib(limit)} once decompressed "
                                       f"(from {_gib(len(raw))} of gzip)", limit)
            if not inflater.eof:
                raise EOFError("Compressed file ended before the end-of-stream marker was "
                               "reached")
        data = inflater.unused_data.lstrip(b"\x00")  # trailing padding, as gzip allows
    return bytes(out)


__all__ = ["MAX_INPUT_BYTES", "MAX_SWEEP_POINTS", "OVERSUBSCRIPTION", "RANK_BASE_BYTES",
           "ResourceError", "available_memory", "cgroup_headroom", "check_input_size",
           "check_memory", "check_points", "check_ranks", "gunzip_bounded", "input_limit",
           "mem_available", "process_headroom", "usable_cpus"]
