"""Importers of public measurements into gradsched trace bundles.

Each importer reads one text log and returns an :class:`ImportResult` holding a
:class:`~gradsched.traces.CommTrace` and/or a :class:`~gradsched.traces.ComputeTrace`,
plus the warnings it raised (each tied to a 1-based physical line of the log).

* ``nccl-tests`` -- nccl-tests / rccl-tests stdout (:mod:`.nccl_tests`)
* ``osu`` -- OSU Micro-Benchmarks collective latency output (:mod:`.osu`)
* ``bcaffe`` -- the MG-WFBP authors' B-Caffe per-blob glog dumps (:mod:`.bcaffe`)
* ``pipedream`` -- PipeDream profiler ``graph.txt`` per-module GPU times (:mod:`.pipedream`)
* ``sailor`` -- Sailor per-transformer-layer GPU profiles ``profile.json`` (:mod:`.sailor`)
* ``manifest`` -- re-import every external file listed in ``traces/manifest.yaml``
  (:mod:`.manifest`)

This module holds what the importers share: warning records, the ``# source:`` /
``# setup:`` provenance header, metadata assembly and the noise check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_text
from gradsched.traces.bundle import CommTrace, ComputeTrace

IMPORTER_VERSION = "1"
"""Bumped whenever an importer's output for the same input would change."""

IMPORTER_NAMES: tuple[str, ...] = ("nccl-tests", "osu", "bcaffe", "pipedream", "sailor")

DROP_FACTOR = 1.25
"""A time that falls by more than this factor while the message size grows is flagged."""


@dataclass(frozen=True)
class ImportWarning:
    """A non-fatal problem found in a log: the file, the 1-based line (if any), a message."""

    path: str
    line: int | None
    message: str

    def render(self) -> str:
        """``warning: FILE line N: message`` (the form printed on stderr)."""
        where = f"{self.path} line {self.line}" if self.line is not None else self.path
        return f"warning: {where}: {self.message}"

    def for_meta(self) -> str:
        """The machine-independent form stored in ``meta['warnings']`` (no directory)."""
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}"


@dataclass
class ImportResult:
    """What an importer produced from one log."""

    comm: CommTrace | None = None
    compute: ComputeTrace | None = None
    warnings: list[ImportWarning] = field(default_factory=list)


class WarningSink:
    """Collects :class:`ImportWarning` records for one input file."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.items: list[ImportWarning] = []

    def warn(self, message: str, line: int | None = None) -> None:
        """Record a warning about ``line`` (1-based physical line) of the file."""
        self.items.append(ImportWarning(self.path, line, message))

    def for_meta(self) -> list[str]:
        """The warnings as stored in the sidecar."""
        return [w.for_meta() for w in self.items]


_SOURCE_RE = re.compile(r"^\s*#\s*source:\s*(?P<text>.*?)\s*$")
_SETUP_RE = re.compile(r"^\s*#\s*setup:\s*(?P<text>.*?)\s*$")


@dataclass(frozen=True)
class Provenance:
    """The ``# source:`` and ``# setup:`` text that heads each shared external file."""

    source: str | None
    setup: str | None


def read_provenance(lines: list[str]) -> Provenance:
    """Find ``# source:`` / ``# setup:`` in the leading comment lines.

    Some files put the setup inside the source line (``..., setup: ...``); it is split off.
    """
    source: str | None = None
    setup: str | None = None
    for raw in lines[:5]:
        match = _SOURCE_RE.match(raw)
        if match and source is None:
            source = match.group("text")
            continue
        match = _SETUP_RE.match(raw)
        if match and setup is None:
            setup = match.group("text")
    if source is not None and setup is None and ", setup: " in source:
        source, setup = source.split(", setup: ", 1)
    return Provenance(source=source or None, setup=setup or None)


def read_lines(path: str | Path) -> list[str]:
    """The physical lines of a text log (line i of the file is element i-1)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    return read_text(path).splitlines()  # unreadable or not UTF-8: named, with the line


@dataclass(frozen=True)
class CommFacts:
    """What a comm log says of itself, or its importer's flags say for it: where it comes
    from (``source``), what it ran on (``hardware``, ``interconnect``), which statistic its
    times are (``statistic``), the ``software`` that measured it, the importer's ``notes``,
    and ``extra`` sidecar fields of that importer."""

    source: str
    hardware: str
    statistic: str
    software: dict[str, Any]
    notes: str
    interconnect: str | None = None
    extra: dict[str, Any] | None = None


def comm_meta(*, importer: str, path: str | Path, facts: CommFacts,
              warnings: WarningSink) -> dict[str, Any]:
    """Assemble a comm sidecar (COMM_META_SCHEMA plus provenance fields)."""
    source, hardware, statistic = facts.source, facts.hardware, facts.statistic
    software, notes = facts.software, facts.notes
    interconnect, extra = facts.interconnect, facts.extra
    meta: dict[str, Any] = {
        "kind": "comm",
        "source": source,
        "hardware": hardware,
        "statistic": statistic,
        "software": software,
        "warnings": warnings.for_meta(),
        "notes": notes,
        "original_file": Path(path).name,
        "importer": importer,
        "importer_version": IMPORTER_VERSION,
    }
    if interconnect:
        meta["interconnect"] = interconnect
    if extra:
        meta.update(extra)
    return meta


def check_size_drops(
    sizes: list[int], times: list[float], lines: list[int], sink: WarningSink, label: str = ""
) -> int:
    """Warn where the time falls by more than :data:`DROP_FACTOR` while the size grows.

    ``sizes`` must be increasing. Returns the number of warnings raised.
    """
    count = 0
    prefix = f"{label}: " if label else ""
    for i in range(1, len(sizes)):
        if times[i] * DROP_FACTOR < times[i - 1]:
            sink.warn(
                f"{prefix}time drops from {times[i - 1]:.6g} s at {sizes[i - 1]} B to "
                f"{times[i]:.6g} s at {sizes[i]} B (more than {DROP_FACTOR:g}x; noisy "
                "measurement)",
                line=lines[i],
            )
            count += 1
    return count


@contextmanager
def source_named(path: str | Path) -> Iterator[None]:
    """Name the imported file in a validation error of the in-memory table built from it
    (``from_frame`` reports ``<memory>``); the row is the imported table's row."""
    try:
        yield
    except InputError as exc:
        if exc.path != "<memory>":
            raise
        reason = f"imported row {exc.row}: {exc.reason}" if exc.row else exc.reason
        raise InputError(reason, path=path, field=exc.field) from None


def build_comm_trace(rows: list[dict[str, Any]], meta: dict[str, Any]) -> CommTrace:
    """Build (and validate) a comm trace from row dicts; float columns keep their values."""
    frame = pd.DataFrame(rows)
    for name in ("time_s", "time_min_s", "time_max_s", "algbw_Bps", "busbw_Bps"):
        if name in frame.columns:
            frame[name] = frame[name].astype(np.float64)
    return CommTrace.from_frame(frame, meta)


__all__ = [
    "DROP_FACTOR",
    "IMPORTER_NAMES",
    "IMPORTER_VERSION",
    "CommFacts",
    "ImportResult",
    "ImportWarning",
    "Provenance",
    "WarningSink",
    "build_comm_trace",
    "check_size_drops",
    "comm_meta",
    "read_lines",
    "read_provenance",
    "source_named",
]
