"""What the studies share: loading a case's compute trace for replay."""

from __future__ import annotations

from pathlib import Path

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.forward import with_forward


def load_case_trace(path: str | Path) -> ComputeTrace:
    """The compute trace at ``path``, refused when missing; a trace that did not measure
    forward gets the default forward assumption (:func:`gradsched.traces.forward.with_forward`)."""
    if not Path(path).is_file():
        raise InputError("compute trace not found", path=path)
    return with_forward(ComputeTrace.load(path), None)
