"""The GPU busy fraction of one step (package docstring, item 9).

With an asynchronous GPU the host's step span (``ProfilerStep#N`` or a named range) is not
the GPU's: a host that runs ahead enqueues a step in a fraction of the time its kernels take
(VGG-16 on an H200: a ~9 ms host span for ~47 ms of kernels), and a host that falls behind
leaves the GPU idle between launches. The step's GPU period is taken from the GPU timeline:
from the first activity the step launched to the first activity the next step launched (the
iteration period as the GPU saw it, host gaps between steps included), or, for the last step,
to the step's last activity end. ``gpu_busy_share`` = union of the step's non-NCCL
activities / that period, a fraction in [0, 1].
"""

from __future__ import annotations

from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto.intervals import union
from gradsched.traces.importers.kineto_gpu.nesting import GPU_CATS, RUNTIME_CATS, is_nccl


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
