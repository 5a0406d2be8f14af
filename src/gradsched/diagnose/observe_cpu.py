"""One rank's PyTorch-profiler trace of a CPU training step over gloo -> the same
per-collective frame as :mod:`gradsched.diagnose.observe`.

On the CPU the collectives are ``gloo:<op>`` spans (``user_annotation``) on gloo's worker
threads, launched by ``c10d::<op>_`` ops on the training thread; the k-th launch of the
step is paired with the k-th gloo span that starts after the step's first launch (gloo runs
its queue first come first served). Compute is the union of the training thread's top-level
CPU ops (nesting as :func:`gradsched.traces.importers.kineto_gpu.nesting.nest`), less the
``c10d::`` launches themselves and less any gloo span the training thread ran itself; any
other wait inside an op counts as compute, as the trace does not tell it apart. Per collective:

* ``ready_s`` = ``launch_s`` = ``drained_s``: the ``c10d`` op's start (DDP calls it when the
  bucket is ready; there is no device queue to wait for);
* ``start_s``, ``end_s``: the gloo span; ``stream``: its thread; ``bytes``: the elements of
  the launch op's tensor list (``record_shapes=True``) times the gradients' element size
  (their AccumulateGrad ops' ``Input type``), else empty;
* ``exposed_s``, ``hideable_s``: as on the GPU, against the CPU compute;
* ``held_kernels`` 0; ``same_stream_as_compute``: the gloo span ran on the training thread.

The serialisation evidence (``contenders``, ``beside``) is: collectives with compute left
after them in the step, and those of them that compute ran beside for more than
:data:`~gradsched.diagnose.observe.HOLD_TOL_S`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gradsched.diagnose.events import complete_events
from gradsched.diagnose.exposure import exposed_length
from gradsched.diagnose.rank_step import COLUMNS, HOLD_TOL_S, RankStep
from gradsched.errors import InputError
from gradsched.traces.importers.kineto.comm_meta import DTYPE_BYTES
from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto.intervals import intersection_length, subtract, union
from gradsched.traces.importers.kineto_gpu.nesting import nest
from gradsched.traces.importers.kineto_gpu.steps import choose_step

GLOO_PREFIX = "gloo:"
LAUNCH_PREFIX = "c10d::"


def has_gloo(events: list[Event]) -> bool:
    """Whether the trace has gloo collectives (a CPU run)."""
    return any(ev.name.startswith(GLOO_PREFIX) for ev in events)


def gloo_pairs(events: list[Event], lo: float, hi: float) -> list[tuple[Event, Event]]:
    """(launch op, gloo span) of the collectives launched in ``[lo, hi)`` (module
    docstring)."""
    launches = sorted((ev for ev in events if ev.name.startswith(LAUNCH_PREFIX)
                       and ev.cat in ("cpu_op", "Operator") and lo <= ev.ts < hi
                       and not ev.name.startswith("c10d::wait")), key=lambda e: e.ts)
    if not launches:
        return []
    spans = sorted((ev for ev in events if ev.name.startswith(GLOO_PREFIX)
                    and ev.ts >= launches[0].ts), key=lambda e: e.ts)
    return list(zip(launches, spans, strict=False))


def observe_cpu_document(doc: Any, label: str, step: int | None = None) -> RankStep:
    """Read one rank's CPU trace (module docstring)."""
    events, header = complete_events(doc, label)
    number, span, _ = choose_step(events, label, step)
    pairs = gloo_pairs(events, span.ts, span.end)
    if not pairs:
        raise InputError(f"ProfilerStep#{number} launched no gloo collective (no "
                         "'c10d::' op followed by a 'gloo:' span)", path=label,
                         field="traceEvents")
    ops, _ = nest(events, span.ts, span.end, label)
    main = (span.pid, span.tid)
    own = union((g.ts, g.end) for g in events if g.name.startswith(GLOO_PREFIX)
                and (g.pid, g.tid) == main)
    compute = subtract(union((op.span.ts, op.span.end) for op in ops
                             if (op.span.pid, op.span.tid) == main
                             and not op.span.name.startswith(LAUNCH_PREFIX)), own)
    first_bw = min((op.span.ts for op in ops if op.backward), default=span.end)
    end = max([span.end] + [g.end for _, g in pairs])
    grad_bytes = next((DTYPE_BYTES.get(str(op.param_type)) for op in ops
                       if op.param_type is not None), None)
    rows = []
    contenders = beside = 0
    for index, (call, gloo) in enumerate(pairs):
        exposed = exposed_length((gloo.ts, gloo.end), compute)
        hideable = intersection_length(compute, [(call.ts, end)])
        contenders += hideable > 0
        beside += hideable > 0 and gloo.dur - exposed > HOLD_TOL_S * 1e6
        rows.append({
            "rank": 0, "index": index, "collective": gloo.name[len(GLOO_PREFIX):],
            "bytes": _bytes(call, grad_bytes), "world_size": None,
            "stream": f"thread {gloo.tid}",
            "phase": "forward" if call.ts < first_bw else "backward",
            "ready_s": _rel(call.ts, span), "drained_s": _rel(call.ts, span),
            "launch_s": _rel(call.ts, span), "start_s": _rel(gloo.ts, span),
            "end_s": _rel(gloo.end, span), "duration_s": round(gloo.dur * 1e-6, 9),
            "exposed_s": round(exposed * 1e-6, 9), "hideable_s": round(hideable * 1e-6, 9),
            "held_kernels": 0, "same_stream_as_compute": (gloo.pid, gloo.tid) == main,
        })
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"),
                                                        dict) else {}
    rank = info.get("rank") if isinstance(info.get("rank"), int) else 0
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["rank"] = rank
    horizon = end + (end - span.ts)
    rel = tuple((round((s - span.ts) * 1e-6, 9), round((e - span.ts) * 1e-6, 9))
                for s, e in compute if e > span.ts and s < horizon)
    return RankStep(label=label, rank=int(rank), world_size=info.get("world_size"),
                    device="CPU (gloo)", step=number, step_s=span.dur * 1e-6,
                    gpu_end_s=(end - span.ts) * 1e-6,
                    compute_s=intersection_length(compute, [(span.ts, end)]) * 1e-6,
                    contenders=int(contenders), beside=int(beside), compute=rel,
                    frame=frame)


def _bytes(call: Event, element_bytes: int | None) -> int | None:
    """Elements of the launch's TensorList input (``record_shapes``) x the gradients'
    element size (their AccumulateGrad ops' ``Input type``); None where either is not
    recorded."""
    dims = call.args.get("Input Dims")
    if element_bytes is None or not isinstance(dims, list) or not dims:
        return None
    first = dims[0]
    shapes = first if first and isinstance(first[0], list) else [first]
    count = 0
    for shape in shapes:
        if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            return None
        size = 1
        for d in shape:
            size *= d
        count += size
    return count * element_bytes


def _rel(ts: float, span: Event) -> float:
    return round((ts - span.ts) * 1e-6, 9)
