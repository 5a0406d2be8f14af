"""The comm record: the NCCL collectives of one step on every rank, aligned on a common
clock (package docstring, last paragraph)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import read_csv_frame
from gradsched.io import read_json, write_csv_atomic, write_json_atomic
from gradsched.traces.bundle import meta_path
from gradsched.traces.importers.kineto.iterations import COLLECTIVE_COLUMNS
from gradsched.traces.importers.kineto_gpu.options import (
    IMPORTER,
    IMPORTER_VERSION,
    Options,
    provenance,
)
from gradsched.traces.importers.kineto_gpu.step import GpuStep

RECORD_KIND = "kineto-comm-record"

RECORD_COLUMNS = [*COLLECTIVE_COLUMNS, "launch_order", "start_after_backward_s",
                  "clock_offset_s"]
"""The comm record: the columns of :mod:`~gradsched.traces.importers.kineto`'s
``PREFIX.collectives.csv`` plus the launch order, the start relative to the rank's backward
start and the rank's clock offset."""


@dataclass
class CommRecord:
    """The collectives of one step (one or more ranks): a CSV plus its sidecar."""

    frame: pd.DataFrame
    meta: dict[str, Any]

    def save(self, path: str | Path) -> None:
        """Write ``path`` and ``<stem>.meta.json`` atomically."""
        write_csv_atomic(path, self.frame)
        write_json_atomic(meta_path(path), self.meta)

    @classmethod
    def load(cls, path: str | Path) -> CommRecord:
        """Read a record and its sidecar back, checking the columns and the kind."""
        path = Path(path)
        meta = read_json(meta_path(path), missing="metadata sidecar is missing")
        if not isinstance(meta, dict) or meta.get("kind") != RECORD_KIND:
            raise InputError(f"sidecar kind must be {RECORD_KIND!r}", path=meta_path(path),
                             field="kind")
        try:
            frame = read_csv_frame(path)
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"not a CSV table: {exc}", path=path) from None
        if list(frame.columns) != RECORD_COLUMNS:
            raise InputError(f"columns must be {RECORD_COLUMNS}", path=path, row=0)
        return cls(frame, meta)


def _collective_rows(gstep: GpuStep, offset_us: float) -> list[dict[str, Any]]:
    rows = []
    for k, c in enumerate(gstep.collectives):
        rows.append({
            "file": Path(gstep.label.rsplit(":", 1)[-1]).name, "rank": gstep.rank,
            "iteration": gstep.step, "collective": c.collective, "bytes": c.nbytes,
            "world_size": c.group or gstep.world_size,
            "start_s": (c.kernel.ts - gstep.step_start_us) * 1e-6,
            "duration_s": c.kernel.dur * 1e-6, "recorded_duration_s": c.kernel.dur * 1e-6,
            "stream": f"stream {c.kernel.args.get('stream', c.kernel.tid)}",
            "source": "nccl-kernel", "dtype": c.dtype, "nelems": c.nelems,
            "launch_order": k,
            "start_after_backward_s": (None if gstep.backward_start_us is None else
                                       (c.kernel.ts - gstep.backward_start_us) * 1e-6),
            "clock_offset_s": offset_us * 1e-6,
        })
    return rows


def align_ranks(steps: list[GpuStep]) -> tuple[dict[int, float], list[tuple[str, Any]],
                                               dict[int, float]]:
    """Clock offsets (us) of each rank vs the lowest rank, the common collective sequence and
    each rank's largest residual (us) after alignment.

    A collective ends at about the same moment on all ranks (each rank's kernel waits for the
    others), so offset = median over the common sequence of (end on rank - end on the
    reference). The sequences (collective, elements) must agree rank by rank.
    """
    ref = min(steps, key=lambda g: (g.rank if g.rank is not None else 1 << 30))
    sequence = [(c.collective, c.nelems) for c in ref.collectives]
    offsets: dict[int, float] = {}
    residual: dict[int, float] = {}
    for g in steps:
        mine = [(c.collective, c.nelems) for c in g.collectives]
        if mine != sequence:
            raise InputError(f"rank {g.rank}'s collective sequence {mine} differs from rank "
                             f"{ref.rank}'s {sequence}: the files are not one step of one "
                             "job", path=g.label, field="traceEvents")
        diffs = np.array([c.kernel.end - r.kernel.end
                          for c, r in zip(g.collectives, ref.collectives, strict=True)])
        offset = float(np.median(diffs)) if diffs.size else 0.0
        offsets[int(g.rank or 0)] = offset
        residual[int(g.rank or 0)] = float(np.max(np.abs(diffs - offset))) if diffs.size \
            else 0.0
    return offsets, sequence, residual


def comm_record(steps: list[GpuStep], options: Options, path: str | Path) -> CommRecord:
    """The NCCL collectives of the step on every rank given (aligned when several)."""
    alignment: dict[str, Any] = {}
    offsets = {int(g.rank or 0): 0.0 for g in steps}
    if len(steps) > 1:
        offsets, sequence, residual = align_ranks(steps)
        alignment = {
            "reference_rank": min(offsets),
            "clock_offset_s": {str(r): round(v * 1e-6, 9) for r, v in sorted(offsets.items())},
            "max_residual_s": {str(r): round(v * 1e-6, 9) for r, v in sorted(residual.items())},
            "common_sequence": [f"{c}:{n}" for c, n in sequence],
            "method": "median over the common collective sequence of the difference of "
                      "kernel end times from the reference rank's",
        }
    rows = [row for g in steps for row in _collective_rows(g, offsets[int(g.rank or 0)])]
    frame = pd.DataFrame(rows, columns=RECORD_COLUMNS)
    for name in ("bytes", "world_size", "nelems", "iteration", "rank", "launch_order"):
        frame[name] = frame[name].astype("Int64")
    first = steps[0]
    meta: dict[str, Any] = {
        "kind": RECORD_KIND, "importer": IMPORTER,
        "importer_version": IMPORTER_VERSION, "source": provenance(options, first.label),
        "hardware": options.hardware or first.device or "not recorded in the trace",
        "original_file": Path(str(path)).name, "step": first.step,
        "ranks": sorted(offsets), "model": options.model,
        "columns": {
            "start_s": "kernel start from the rank's ProfilerStep start (rank's clock)",
            "start_after_backward_s": "kernel start from the rank's first backward kernel",
            "duration_s": "NCCL kernel duration (includes waiting for the peers)",
            "bytes": "max(in, out) elements x dtype size (nccl-tests size)",
            "world_size": "the collective's group size (else the trace's world size)",
            "clock_offset_s": "the rank's clock minus the reference rank's",
            "launch_order": "order of the CPU launches within the rank's step",
        },
        "warnings": [w for g in steps for w in g.warnings],
    }
    if alignment:
        meta["alignment"] = alignment
    return CommRecord(frame, meta)
