"""What the Kineto GPU importer is and what the trace does not say (the manifest's ``args``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gradsched.traces.host_bound import CPU_BOUND_SHARE

IMPORTER = "kineto-gpu"
IMPORTER_VERSION = "1"


@dataclass
class Options:
    """What the trace does not say (manifest ``args``)."""

    model: str = "unknown"
    step: int | None = None
    step_range: str | None = None
    rank: int | None = None
    params: str | None = None
    batch_size: int | None = None
    world_size: int | None = None
    device: str | None = None
    source: str | None = None
    hardware: str | None = None
    date: str = "not recorded in the trace"
    note: str | None = None
    cpu_bound_share: float = CPU_BOUND_SHARE
    host: bool = False
    """Also write the host columns (``host_forward_s``, ``host_backward_s``,
    ``forward_launches``, ``backward_launches``; :mod:`.host`)."""


def provenance(options: Options, label: str) -> str:
    """The ``source`` of the outputs: the option, else the trace file's name."""
    return options.source or f"Kineto trace {Path(label).name}"
