"""``import_kineto_gpu``: read the trace(s), build one rank's compute trace and the comm
record of every rank."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gradsched.errors import InputError
from gradsched.traces.importers import ImportResult, WarningSink
from gradsched.traces.importers.kineto.events import read_documents
from gradsched.traces.importers.kineto_gpu.comm_record import CommRecord, comm_record
from gradsched.traces.importers.kineto_gpu.compute import build_compute
from gradsched.traces.importers.kineto_gpu.options import Options
from gradsched.traces.importers.kineto_gpu.step import GpuStep, parse_gpu_step


@dataclass
class KinetoGpuResult(ImportResult):
    """An :class:`ImportResult` with the step's comm record and the per-rank steps."""

    comm_record: CommRecord | None = None
    steps: list[GpuStep] = field(default_factory=list)


def import_kineto_gpu(path: str | Path, options: Options | None = None) -> KinetoGpuResult:
    """Read a Kineto GPU trace (or a tar of per-rank traces): compute trace of one rank
    (``rank``, default the lowest) plus the comm record of every rank. Nothing is written."""
    options = options or Options()
    docs = read_documents(path)
    steps = [parse_gpu_step(doc, label, options) for label, doc in docs]
    steps.sort(key=lambda g: (g.rank if g.rank is not None else 1 << 30, g.label))
    if options.rank is None:
        chosen = steps[0]
    else:
        match = [g for g in steps if g.rank == options.rank]
        if not match:
            raise InputError(f"no trace of rank {options.rank} (ranks: "
                             f"{[g.rank for g in steps]})", path=path, field="rank")
        chosen = match[0]
    sink = WarningSink(path)
    compute = build_compute(chosen, options, path, sink)
    record = comm_record(steps, options, path)
    return KinetoGpuResult(compute=compute, warnings=sink.items,
                           comm_record=record, steps=steps)
