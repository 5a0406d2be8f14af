"""The one reader of the kernel's pseudo-files: ``/proc`` and the cgroup files under
``/sys/fs/cgroup``.

A pseudo-file reports size 0 and is generated as it is read, so the size bound of
:func:`gradsched.io.read_bytes` cannot apply before the read; :func:`read_pseudo_bytes`
reads at most :data:`PSEUDO_FILE_BYTES` instead. Numbers are parsed strictly
(:func:`pseudo_int`: ASCII digits only, within int64), as proc(5) and the cgroup v1/v2
documentation describe the fields.

Two outcomes only, both documented at each caller:

* the file is absent or unreadable (not Linux, a process that has ended, a cgroup
  controller that is not mounted): ``None``, and the caller falls back (no bound, no
  sample);
* the file is there but is not what the kernel writes (a value that is not a number, a
  missing field, more than the bound): :class:`~gradsched.errors.InputError` naming the
  file and the field, which every command prints as one line (exit status 2).

Standard library only: :mod:`gradsched.io` and :mod:`gradsched.admission` use it before
anything heavy is imported.
"""

from __future__ import annotations

from pathlib import Path

from gradsched.errors import InputError

PSEUDO_FILE_BYTES = 1 << 20
"""Most bytes read from one pseudo-file (``/proc/meminfo`` and ``/proc/stat`` of a
thousand-CPU machine are far smaller)."""

INT64_MAX = 2**63 - 1


def read_pseudo_bytes(path: str | Path) -> bytes | None:
    """The bytes of the pseudo-file ``path``, at most :data:`PSEUDO_FILE_BYTES`; None when
    it is absent or unreadable. More than the bound raises :class:`InputError`."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(PSEUDO_FILE_BYTES + 1)
    except OSError:
        return None
    if len(raw) > PSEUDO_FILE_BYTES:
        raise InputError(f"more than {PSEUDO_FILE_BYTES} bytes: not a kernel file "
                         "gradsched reads", path=path)
    return raw


def read_pseudo(path: str | Path) -> str | None:
    """The UTF-8 text of the pseudo-file ``path`` (:func:`read_pseudo_bytes`); None when it
    is absent or unreadable; bytes that are not UTF-8 raise :class:`InputError`."""
    raw = read_pseudo_bytes(path)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                         f"{exc.start})", path=path,
                         line=raw.count(b"\n", 0, exc.start) + 1) from None


def pseudo_int(text: str, path: str | Path, field: str) -> int:
    """``text`` (surrounding white space ignored) as a non-negative integer: ASCII digits
    within int64, nothing else (``12x``, ``-1``, ``1e3``, ``١٢`` are refused with an
    :class:`InputError` naming ``path`` and ``field``)."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) > INT64_MAX:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InputError(f"{shown!r} is not a number (expected decimal digits)",
                         path=path, field=field)
    return int(value)


def read_pseudo_int(path: str | Path, *, unlimited: str | None = None) -> int | None:
    """The one number a cgroup or ``/proc/sys`` file holds (``pids.max``,
    ``memory.current``, ``kernel/threads-max``); None when the file is absent, or holds
    ``unlimited`` (cgroup v2 writes ``max``). Anything else raises :class:`InputError`."""
    text = read_pseudo(path)
    if text is None or (unlimited is not None and text.strip() == unlimited):
        return None
    return pseudo_int(text, path, Path(path).name)


def process_stat(pid: int, proc: str | Path = "/proc") -> tuple[str, int] | None:
    """``(state, start time in clock ticks since boot)`` of process ``pid``
    (``/proc/PID/stat`` fields 3 and 22, proc(5)); None when there is no such process (or
    no ``/proc``). The command name (field 2) may hold any byte, ``)`` included, so the
    fields are read after its last ``)``."""
    path = Path(proc) / str(pid) / "stat"
    raw = read_pseudo_bytes(path)
    if raw is None:
        return None
    head, paren, tail = raw.rpartition(b")")
    fields = tail.decode("ascii", errors="replace").split()
    if not paren or b"(" not in head or len(fields) < 20:
        raise InputError("not a process status line (pid (comm) state ... starttime)",
                         path=path)
    return fields[0], pseudo_int(fields[19], path, "starttime")


__all__ = ["INT64_MAX", "PSEUDO_FILE_BYTES", "process_stat", "pseudo_int", "read_pseudo",
           "read_pseudo_bytes", "read_pseudo_int"]
