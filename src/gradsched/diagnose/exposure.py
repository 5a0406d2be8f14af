"""Exposed communication: the part of a collective's device interval during which no
compute kernel runs, by interval arithmetic on the GPU timeline.

This is the per-collective form of HolisticTraceAnalysis' communication/computation overlap
(facebookresearch/HolisticTraceAnalysis ``hta/analyzers/communication_analysis.py``,
``get_comm_comp_overlap``, at commit 0c2146a8d003629a67f225528969752e1f0656aa): HTA merges
the communication kernels' intervals and the computation kernels' intervals of a rank,
sweeps their starts and ends, and calls *overlap* the time when both are running; its ratio
is overlap / merged communication time. A kernel is communication when its name holds
``ncclKernel``, memory when it holds ``Memcpy`` or ``Memset``, computation otherwise
(``hta/utils/utils.py``, ``get_kernel_type``, same commit); memory activities are neither.

Here a collective's ``exposed_s`` is its interval minus the union of the computation
kernels (any stream: a kernel on the collective's own stream cannot run beside it, so it
never overlaps). Summed over collectives that do not overlap each other this is HTA's
merged communication time less its overlap; ``tests/diagnose/test_exposure.py`` checks the
two against an independent sweep written as HTA describes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gradsched.traces.importers.kineto.intervals import intersection_length, subtract, union

Interval = tuple[float, float]


def is_compute_kernel_name(name: str) -> bool:
    """HTA's COMPUTATION type: neither an NCCL kernel nor a memory activity."""
    return not ("nccl" in name.lower() or "Memcpy" in name or "Memset" in name)


def compute_union(intervals: Iterable[Interval]) -> list[Interval]:
    """The compute intervals merged into disjoint sorted ones (HTA's
    ``merge_kernel_intervals``)."""
    return union(intervals)


def exposed_intervals(comm: Interval, compute: Sequence[Interval]) -> list[Interval]:
    """The parts of ``comm`` during which no interval of ``compute`` (disjoint, sorted: see
    :func:`compute_union`) runs."""
    return subtract([comm], compute) if comm[1] > comm[0] else []


def exposed_length(comm: Interval, compute: Sequence[Interval]) -> float:
    """Length of :func:`exposed_intervals`: ``(end - start) - |comm ∩ compute|``."""
    if comm[1] <= comm[0]:
        return 0.0
    return (comm[1] - comm[0]) - intersection_length([comm], compute)


def overlap_ratio(comms: Iterable[Interval], compute: Sequence[Interval]) -> float | None:
    """HTA's ratio for one rank: |merged comm ∩ merged compute| / |merged comm| (None when
    there is no communication)."""
    merged = union(comms)
    total = sum(e - s for s, e in merged)
    if total <= 0:
        return None
    return intersection_length(merged, compute) / total
