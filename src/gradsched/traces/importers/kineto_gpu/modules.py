"""Forward attribution by ``nn.Module`` ranges, where the trace has them.

A trace recorded with ``with_stack=True`` holds one ``python_function`` event
``nn.Module: <Class>_<k>`` per module call, on the thread that ran the forward (PyTorch's
profiler, ``torch/csrc/profiler/python/init.cpp``). A forward op lies in its innermost module
call. Each module call that holds an op owning gradients (a layer) gets the kernel time of
every forward op inside it, the owning op's and the parameter-free ops' around it (a batch
norm's ``num_batches_tracked`` update, a linear layer's transpose). Kernel time of ops in
module calls without such an op (ReLU, pooling, a residual add in its block) goes to the next
layer, as in the importer's default method (and the loss, after the last layer, to the last).
"""

from __future__ import annotations

from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto_gpu.nesting import Op

MODULE_PREFIX = "nn.Module: "


def module_spans(events: list[Event], pid: int, tid: int, lo: float, hi: float
                 ) -> list[Event]:
    """The ``nn.Module`` calls on the forward thread inside ``[lo, hi)``."""
    return [ev for ev in events if ev.cat == "python_function" and ev.pid == pid
            and ev.tid == tid and lo <= ev.ts < hi and ev.name.startswith(MODULE_PREFIX)]


def innermost(ops: list[Op], spans: list[Event]) -> list[int | None]:
    """Per op, the index (in ``spans``) of the shortest module call holding its start."""
    out: list[int | None] = []
    for op in ops:
        best: int | None = None
        for k, sp in enumerate(spans):
            if sp.ts <= op.span.ts < sp.end and (best is None or sp.dur < spans[best].dur):
                best = k
        out.append(best)
    return out


def forward_times_by_module(fwd_ops: list[Op], owners: list[int], modules: list[int | None]
                            ) -> tuple[dict[int, float], float, float]:
    """Forward kernel time per owning op, the tail after the last owner, and the part that
    ran inside the owners' own module calls."""
    owned = set(owners)
    layer_of: dict[int, int] = {}
    for i in sorted(owned):
        if modules[i] is not None:
            layer_of.setdefault(modules[i], i)
    out = dict.fromkeys(owned, 0.0)
    pending = inside = 0.0
    last = None
    for i, op in enumerate(fwd_ops):
        spent = op.kernel_s()
        target = i if i in owned else layer_of.get(modules[i]) if modules[i] is not None \
            else None
        if target is not None:
            out[target] += spent
            inside += spent
        else:
            pending += spent
        if i in owned:
            out[i] += pending
            pending = 0.0
            last = i
    if last is not None:
        out[last] += pending
    return out, pending, inside
