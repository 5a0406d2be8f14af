"""The NCCL kernels of a step as collectives: metadata from the kernel, the matching
``record_param_comms`` op or the enclosing ``nccl:<op>`` span (package docstring, item 8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsched.traces.importers.kineto.comm_meta import (
    DTYPE_BYTES,
    KERNEL_OP,
    NCCL_KERNEL_RE,
    meta_from_args,
    normalise_collective,
    shape_bytes,
)
from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto_gpu.nesting import Launch


@dataclass
class Collective:
    """One NCCL kernel of the step."""

    kernel: Event
    launch: Launch
    collective: str
    nelems: int | None
    nbytes: int | None
    dtype: str | None
    group: int | None


def _annotation_meta(launch: Launch) -> dict[str, Any] | None:
    """Collective metadata from the ``nccl:<op>`` span around a launch (Input Dims)."""
    for span in reversed(launch.stack):
        if span.name.startswith("nccl:"):
            nelems, _, dtype = shape_bytes(span)
            return {"collective": normalise_collective(span.name[5:]), "in": nelems,
                    "out": None, "group": None, "dtype": dtype}
    return None


def to_collective(kernel: Event, launch: Launch, by_extid: dict[Any, dict[str, Any]],
                label: str) -> Collective:
    meta = (meta_from_args(kernel, label) or by_extid.get(kernel.args.get("External id"))
            or by_extid.get(launch.event.args.get("External id"))
            or _annotation_meta(launch))
    if meta is None:
        match = NCCL_KERNEL_RE.match(kernel.name)
        op = match.group(1) if match else "unknown"
        meta = {"collective": KERNEL_OP.get(op, op.lower()), "in": None, "out": None,
                "group": None, "dtype": None}
    counts = [c for c in (meta["in"], meta["out"]) if c is not None]
    nelems = max(counts) if counts else None
    size = DTYPE_BYTES.get(str(meta["dtype"]))
    nbytes = nelems * size if nelems is not None and size is not None else None
    return Collective(kernel, launch, meta["collective"], nelems, nbytes,
                      None if meta["dtype"] is None else str(meta["dtype"]), meta["group"])
