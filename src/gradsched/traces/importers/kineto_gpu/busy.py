"""The GPU busy fraction of one step (package docstring, item 9).

With an asynchronous GPU the host's step span (``ProfilerStep#N`` or a named range) is not
the GPU's: a host that runs ahead enqueues a step in a fraction of the time its kernels take
(VGG-16 on an H200: a ~9 ms host span for ~47 ms of kernels), and a host that falls behind
leaves the GPU idle between launches. The step's GPU period is taken from the GPU timeline:
from the first activity the step launched to the first activity the next step launched (the
iteration period as the GPU saw it, host gaps between steps included), or, for the last step,
to the step's last activity end. ``gpu_busy_share`` = union of the step's non-NCCL
activities / that period, a fraction in [0, 1].

This is the project's one definition of a GPU's busy fraction: the importer's sidecar
(``gpu_busy_share``) and ``benchmarks/gpu/gpu_check.py`` both use :func:`step_busy`'s
arithmetic (:func:`gpu_busy`, :func:`busy_share`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradsched.traces.importers.kineto.events import Event, complete_events, read_documents
from gradsched.traces.importers.kineto.intervals import union
from gradsched.traces.importers.kineto_gpu.nesting import (
    GPU_CATS,
    RUNTIME_CATS,
    is_nccl,
    link_kernels,
    nest,
)
from gradsched.traces.importers.kineto_gpu.steps import choose_step, next_step


@dataclass(frozen=True)
class StepBusy:
    """How busy the GPU was during one step: the union of its non-NCCL activities
    (``busy_s``) over its GPU period (``period_s``; ``period_end`` says how it ended)."""

    step: int
    busy_s: float
    period_s: float
    period_end: str

    @property
    def share(self) -> float:
        """``busy_s / period_s``, a fraction in [0, 1] (0 for a step without GPU work)."""
        return busy_share(self.busy_s, self.period_s)


def busy_share(busy: float, period: float) -> float:
    """Busy time over the GPU period (same unit), clipped to 1; 0 for an empty period."""
    return min(1.0, busy / period) if period else 0.0


def _first_activity(events: list[Event], lo: float, hi: float) -> float | None:
    """Start of the first GPU activity launched by a runtime call inside ``[lo, hi)``."""
    corrs = {ev.args.get("correlation") for ev in events
             if ev.cat in RUNTIME_CATS and lo <= ev.ts < hi}
    corrs.discard(None)
    starts = [ev.ts for ev in events if ev.cat in GPU_CATS and not is_nccl(ev)
              and ev.args.get("correlation") in corrs]
    return min(starts) if starts else None


def gpu_busy(events: list[Event], kernels: list[Event], next_step: Event | None
             ) -> tuple[float, float, str]:
    """(busy us, GPU period us, how the period ended) of a step's activities."""
    spans = [(k.ts, k.end) for k in kernels if not is_nccl(k)]
    if not spans:
        return 0.0, 0.0, "no GPU activity"
    busy = sum(e - s for s, e in union(spans))
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    nxt = _first_activity(events, next_step.ts, next_step.end) if next_step else None
    if nxt is not None and nxt >= last:
        return busy, nxt - first, "first activity of the next step"
    return busy, last - first, "last activity of the step"


def step_busy(doc: Any, label: str, step: int | None = None, step_range: str | None = None
              ) -> StepBusy:
    """The busy fraction of one step of a Kineto trace document: the step the importer
    would import (``step``/``step_range`` as in :class:`.options.Options`), its GPU
    activities being those its top-level CPU ops launched (package docstring, item 2)."""
    events, _ = complete_events(doc, label)
    number, span, _ = choose_step(events, label, step, step_range)
    ops, launches = nest(events, span.ts, span.end, label)
    link_kernels([ev for ev in events if ev.cat in GPU_CATS], launches, label)
    kernels = [k for op in ops for k in op.kernels]
    busy_us, period_us, how = gpu_busy(events, kernels, next_step(events, span, step_range))
    return StepBusy(step=number, busy_s=busy_us * 1e-6, period_s=period_us * 1e-6,
                    period_end=how)


def trace_busy(path: str | Path, step: int | None = None, step_range: str | None = None
               ) -> StepBusy:
    """:func:`step_busy` of a trace file (``.json`` or ``.json.gz``; of a ``.tar.gz`` of
    ranks, the first member)."""
    label, doc = read_documents(path)[0]
    return step_busy(doc, label, step, step_range)
