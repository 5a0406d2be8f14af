"""Reading a Chrome trace (PyTorch profiler / Kineto JSON): bytes -> document -> checked
complete ("X") events.

A file may be gzipped; a ``.tar``/``.tar.gz`` archive holds one trace per rank
(:func:`read_documents`). Errors name the file, the archive member and the event.
"""

from __future__ import annotations

import io
import json
import math
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gradsched.admission import ResourceError, check_input_size, gunzip_bounded, input_limit
from gradsched.errors import InputError
from gradsched.io import parse_json, read_bytes
from gradsched.limits import MAX_SECONDS

MAX_DURATION_US = MAX_SECONDS * 1e6
"""Longest event accepted (:data:`~gradsched.limits.MAX_SECONDS`, in microseconds)."""

MAX_TIMESTAMP_US = float(2**62)
"""Latest timestamp accepted (microseconds since the profiler's epoch): far beyond any clock,
far below what makes sums of timestamps lose every digit."""

STEP_RE = re.compile(r"^ProfilerStep#([0-9]+)$")
"""The span ``prof.step()`` records around each profiled iteration (PyTorch
``torch/profiler/profiler.py``, ``profile.step``: ``ProfilerStep#`` and the step count, a
whole number from 0)."""

_STEP_LIKE = re.compile(r"^ProfilerStep#(.*)$")


def check_step_names(events: list[Event], path: str,
                     like: re.Pattern[str] = _STEP_LIKE,
                     step: re.Pattern[str] = STEP_RE) -> None:
    """Refuse a step span whose number is not a whole number of ASCII digits
    (``ProfilerStep#-1``, ``ProfilerStep#1.5``): it would be passed over silently, and the
    trace read with a step less or as one whole-trace iteration."""
    for ev in events:
        if like.match(ev.name) and not step.match(ev.name):
            raise InputError(f"{ev.name!r}: a step number is a whole number >= 0 (ASCII "
                             "digits)", path=path, field=f"traceEvents[{ev.index}].name")


def read_trace_json(path: str | Path) -> Any:
    """Load a (possibly gzipped) Chrome trace JSON file, with clear errors."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    check_input_size(path)  # before reading it
    return decode_trace_bytes(read_bytes(path), path)


def _gunzip(raw: bytes, label: str | Path) -> bytes:
    """Decompress gzip data, at most :func:`~gradsched.admission.input_limit` bytes of it (a
    small file that inflates to gigabytes is refused at the bound); a truncated or corrupt
    stream names the byte where it fails."""
    try:
        return gunzip_bounded(raw, label)
    except (OSError, EOFError, zlib.error) as exc:
        inflater = zlib.decompressobj(wbits=47)
        try:
            done = len(inflater.decompress(raw, input_limit() + 1))  # bounded here too
            where = (f"the stream ends at byte {len(raw)} without its end marker, after "
                     f"{done} decompressed bytes" if not inflater.eof else "")
        except zlib.error:
            where = f"it is unreadable within its {len(raw)} bytes"
        detail = f"; {where}" if where else ""
        raise InputError(f"corrupt gzip data: {exc}{detail} (a truncated file?)",
                         path=label) from None


def decode_trace_bytes(raw: bytes, label: str | Path) -> Any:
    """Parse the bytes of a (possibly gzipped) Chrome trace; ``label`` names it in errors."""
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, label)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}",
                         path=label) from None
    if not text.strip():
        raise InputError("empty file: not a Chrome trace", path=label)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg}, column {exc.colno}, character "
                         f"{exc.pos} of {len(text)}); a truncated profile?", path=label,
                         line=exc.lineno) from None
    except RecursionError:
        return parse_json(text, label)  # the shared reader's refusal, one line


def read_documents(path: str | Path) -> list[tuple[str, Any]]:
    """``[(label, trace document)]``: one for a trace file, one per member of a tar archive.

    Tar members are read in memory (no extraction), in name order; labels are
    ``ARCHIVE:MEMBER`` so errors name both.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    check_input_size(path)  # before reading it
    if not (path.name.endswith((".tar.gz", ".tgz", ".tar"))):
        return [(str(path), decode_trace_bytes(read_bytes(path), path))]
    data = read_bytes(path)
    if data[:2] == b"\x1f\x8b":  # the archive decompressed within the bound, in memory
        data = _gunzip(data, path)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            members = sorted((m for m in archive.getmembers() if m.isfile()),
                             key=lambda m: m.name)
            limit = input_limit()
            if sum(m.size for m in members) > limit:  # sparse members claim any size
                raise ResourceError(str(path), f"{sum(m.size for m in members)} bytes of "
                                    "members", f"a bound of {limit} bytes per input",
                                    "split the archive")
            raw = [(m.name, archive.extractfile(m).read()) for m in members]  # type: ignore[union-attr]
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"corrupt or truncated tar archive: {exc}", path=path) from None
    if not raw:
        raise InputError("tar archive holds no files", path=path)
    return [(f"{path}:{name}", decode_trace_bytes(data, f"{path}:{name}"))
            for name, data in raw]


@dataclass
class Event:
    index: int
    name: str
    cat: str
    tid: Any
    pid: Any
    ts: float  # us
    dur: float  # us
    args: dict[str, Any]

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _raw_events(doc: Any, path: str) -> tuple[list[Any], dict[str, Any]]:
    """The ``traceEvents`` list (or the top-level list) and the other top-level keys."""
    if isinstance(doc, list):
        return doc, {}
    if not isinstance(doc, dict):
        raise InputError("top level must be an object with 'traceEvents' or a list of "
                         "events", path=path)
    if "traceEvents" not in doc:
        raise InputError("no 'traceEvents' list: not a Chrome/Kineto trace", path=path,
                         field="traceEvents")
    raw = doc["traceEvents"]
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    if not isinstance(raw, list):
        raise InputError("'traceEvents' must be a list", path=path, field="traceEvents")
    return raw, header


def _time_field(ev: dict[str, Any], key: str, name: str, path: str, where: str) -> float:
    """``ts`` or ``dur`` (us) of an event: a finite JSON number (the profiler writes
    numbers; a string is refused, not parsed)."""
    value = ev.get(key)
    if type(value) is float and math.isfinite(value):  # the common cases, checked fast
        return value
    if type(value) is int and -(2**62) < value < 2**62:
        return float(value)
    if isinstance(value, str):
        raise InputError(f"complete event {name!r}: '{key}' is the string {value!r}, not a "
                         "number (the profiler writes numbers)", path=path,
                         field=f"{where}.{key}")
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not np.isfinite(value):
        raise InputError(f"complete event {name!r} has no numeric '{key}' "
                         f"(got {ev.get(key)!r})", path=path, field=f"{where}.{key}")
    return float(value)


def _complete_event(i: int, ev: dict[str, Any], path: str) -> Event:
    """One checked complete event (``ph`` = ``X``)."""
    where = f"traceEvents[{i}]"
    name = ev.get("name")
    if not isinstance(name, str):
        raise InputError("complete event without a string 'name'", path=path,
                         field=f"{where}.name")
    values = [_time_field(ev, key, name, path, where) for key in ("ts", "dur")]
    if values[1] < 0:
        raise InputError(f"event {name!r} has a negative duration {values[1]:g} us",
                         path=path, field=f"{where}.dur")
    if values[1] > MAX_DURATION_US:
        raise InputError(f"event {name!r} lasts {values[1]:g} us, beyond the physical range "
                         f"(at most {MAX_SECONDS:g} s)", path=path, field=f"{where}.dur")
    if not 0 <= values[0] <= MAX_TIMESTAMP_US:
        raise InputError(f"event {name!r} has timestamp {values[0]:g} us, outside 0 to "
                         f"{MAX_TIMESTAMP_US:g} us (profiler timestamps are not negative)",
                         path=path, field=f"{where}.ts")
    args = ev.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InputError(f"event {name!r}: 'args' must be an object", path=path,
                         field=f"{where}.args")
    return Event(i, name, str(ev.get("cat", "")), ev.get("tid"), ev.get("pid"),
                 values[0], values[1], args)


def complete_events(doc: Any, path: str) -> tuple[list[Event], dict[str, Any]]:
    """The complete ("X") events of a trace, checked; plus the top-level header."""
    raw, header = _raw_events(doc, path)
    out: list[Event] = []
    for i, ev in enumerate(raw):
        if not isinstance(ev, dict):
            raise InputError("event is not an object", path=path, field=f"traceEvents[{i}]")
        if ev.get("ph") != "X":
            continue
        out.append(_complete_event(i, ev, path))
    return out, header
