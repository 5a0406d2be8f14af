"""Collective metadata in Kineto events: collective names, dtype sizes, the ``args`` PyTorch
attaches to ``record_param_comms`` ops and NCCL kernels, and tensor sizes recorded with
``record_shapes``."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gradsched.errors import InputError
from gradsched.limits import MAX_BYTES, MAX_RANKS
from gradsched.traces.importers.kineto.events import Event

# c10::ScalarType names (record_param_comms / kernel args) and the C++ type names of
# "Input type" in record_shapes output.
DTYPE_BYTES: dict[str, int] = {
    "Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4,
    "Double": 8, "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "Bool": 1,
    "QInt8": 1, "QUInt8": 1, "QInt32": 4, "BFloat16": 2, "Float8_e5m2": 1,
    "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1, "Float8_e4m3fnuz": 1, "UInt16": 2,
    "UInt32": 4, "UInt64": 8,
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "int": 4, "long int": 8,
    "long": 8, "int64_t": 8, "short int": 2, "short": 2, "signed char": 1,
    "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "unsigned short": 2,
    "unsigned int": 4, "unsigned long": 8,
}

_COLLECTIVE_ALIASES: dict[str, str] = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce",
    "allreduce_coalesced": "all_reduce", "allreduce_sparse": "all_reduce",
    "allgather": "all_gather", "all_gather": "all_gather", "allgather_base": "all_gather",
    "all_gather_base": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor": "all_gather", "allgather_coalesced": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce", "barrier": "barrier",
    "alltoall": "all_to_all", "all_to_all": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all", "alltoallv": "all_to_all", "sendrecv": "send_recv",
    "send": "send", "recv": "recv", "gather": "gather", "scatter": "scatter",
}

NCCL_KERNEL_RE = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
KERNEL_OP = {"AllReduce": "all_reduce", "AllGather": "all_gather",
             "ReduceScatter": "reduce_scatter", "Broadcast": "broadcast", "Reduce": "reduce",
             "SendRecv": "send_recv", "Send": "send", "Recv": "recv"}
"""NCCL kernel name -> collective, used only when a kernel carries no metadata."""


def normalise_collective(name: str) -> str:
    """``allreduce`` / ``_allgather_base`` / ``c10d`` names -> gradsched's spelling."""
    key = name.strip().lower().strip("_")
    return _COLLECTIVE_ALIASES.get(key, key)


def _int_arg(ev: Event, key: str, path: str) -> int | None:
    if key not in ev.args:
        return None
    value = ev.args[key]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{key!r} must be a number, got {value!r}", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}")
    try:
        number = int(value)
    except (ValueError, OverflowError):
        raise InputError(f"{key!r} must be a number, got {value!r}", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}") from None
    if number < 0:
        raise InputError(f"{key!r} is negative ({number})", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}")
    low, high = (1, MAX_RANKS) if key == "Group size" else (0, MAX_BYTES)
    if not low <= number <= high:
        raise InputError(f"{key!r} is {number}, outside {low}..{high}", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}")
    return number


def meta_from_args(ev: Event, path: str) -> dict[str, Any] | None:
    """The collective metadata PyTorch attaches (record_param_comms / NCCL kernels)."""
    if "Collective name" not in ev.args:
        return None
    return {
        "collective": normalise_collective(str(ev.args["Collective name"])),
        "in": _int_arg(ev, "In msg nelems", path),
        "out": _int_arg(ev, "Out msg nelems", path),
        "group": _int_arg(ev, "Group size", path),
        "dtype": ev.args.get("dtype"),
    }


def shape_bytes(ev: Event) -> tuple[int | None, int | None, str | None]:
    """(elements, bytes, dtype) of the tensor inputs recorded with record_shapes."""
    dims = ev.args.get("Input Dims")
    types = ev.args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None, None, None
    nelems = 0
    nbytes = 0
    dtype = None
    found = False
    for shape, typ in zip(dims, types, strict=False):
        shapes = shape if shape and isinstance(shape[0], list) else [shape]  # TensorList
        size = DTYPE_BYTES.get(str(typ))
        if size is None:
            continue
        for sh in shapes:
            if not isinstance(sh, list) or not all(isinstance(d, int) for d in sh):
                continue
            count = int(np.prod(sh)) if sh else 1
            nelems += count
            nbytes += count * size
            dtype = dtype or str(typ)
            found = True
    return (nelems, nbytes, dtype) if found else (None, None, None)

