"""The CPU side of one step: top-level CPU ops (nesting by time on each thread) and the
runtime calls that launch GPU activity, linked by ``args.correlation`` (package docstring,
item 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.comm_meta import NCCL_KERNEL_RE
from gradsched.traces.importers.kineto.events import STEP_RE, Event

GPU_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver"})
CPU_CATS = frozenset({"cpu_op", "Operator", "user_annotation"})
_EVALUATE = "autograd::engine::evaluate_function:"


@dataclass
class Op:
    """A top-level CPU op of the step and what hangs off it."""

    span: Event
    seqs: list[int] = field(default_factory=list)
    backward_seq: int | None = None
    accumulate: bool = False
    param_dims: Any = None
    param_type: Any = None
    kernels: list[Event] = field(default_factory=list)

    @property
    def backward(self) -> bool:
        return self.backward_seq is not None

    def kernel_s(self) -> float:
        """GPU time of the op's non-NCCL activities (s)."""
        return sum(k.dur for k in self.kernels if not is_nccl(k)) * 1e-6


@dataclass
class Launch:
    """A runtime call: its top-level op and the CPU spans around it (innermost last)."""

    event: Event
    top: Op | None
    stack: list[Event]


def is_nccl(ev: Event) -> bool:
    return ev.cat in ("kernel", "Kernel") and bool(NCCL_KERNEL_RE.match(ev.name))


def _is_annotation(ev: Event) -> bool:
    return (ev.cat == "user_annotation" or bool(STEP_RE.match(ev.name))
            or ev.name.startswith("##"))


def _seq(ev: Event, label: str) -> int | None:
    value = ev.args.get("Sequence number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"'Sequence number' must be an integer, got {value!r}", path=label,
                         field=f"traceEvents[{ev.index}].args.Sequence number")
    return value


def correlation(ev: Event, label: str) -> int | None:
    value = ev.args.get("correlation")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"'correlation' must be an integer, got {value!r}", path=label,
                         field=f"traceEvents[{ev.index}].args.correlation")
    return value


def _note_span(top: Op, ev: Event, label: str) -> None:
    """Record what a CPU span says about its top-level op."""
    seq = _seq(ev, label)
    if seq is not None:
        top.seqs.append(seq)
        if top.backward_seq is None and (ev.name.startswith(_EVALUATE)
                                         or bool(ev.args.get("Fwd thread id"))):
            top.backward_seq = seq
    if ev.name.endswith("AccumulateGrad"):
        top.accumulate = True
        dims = ev.args.get("Input Dims")
        if isinstance(dims, list) and dims and top.param_dims is None:
            top.param_dims = dims[0]
            types = ev.args.get("Input type")
            top.param_type = types[0] if isinstance(types, list) and types else None


def _nest_thread(items: list[Event], label: str, ops: list[Op],
                 launches: dict[int, Launch]) -> None:
    """Sweep one thread's CPU spans and runtime calls (sorted) into top-level ops."""
    stack: list[Event] = []
    top: Op | None = None
    for ev in items:
        while stack and stack[-1].end <= ev.ts and stack[-1].ts != ev.ts:
            stack.pop()
        if not any(not _is_annotation(s) for s in stack):
            top = None
        if ev.cat in RUNTIME_CATS:
            corr = correlation(ev, label)
            if corr is not None:
                if corr in launches:  # the profiler numbers each runtime call once
                    raise InputError(f"correlation id {corr} of runtime call {ev.name!r} "
                                     f"was given already to event "
                                     f"{launches[corr].event.index}: each launch has its own",
                                     path=label,
                                     field=f"traceEvents[{ev.index}].args.correlation")
                launches[corr] = Launch(ev, top, list(stack))
            continue
        if top is None and not _is_annotation(ev):
            top = Op(ev)
            ops.append(top)
        if top is not None:
            _note_span(top, ev, label)
        stack.append(ev)


def nest(events: list[Event], lo: float, hi: float, label: str
          ) -> tuple[list[Op], dict[int, Launch]]:
    """Top-level ops and launches of the CPU threads inside ``[lo, hi)`` (us)."""
    threads: dict[Any, list[Event]] = {}
    for ev in events:
        if (ev.cat in CPU_CATS or ev.cat in RUNTIME_CATS) and lo <= ev.ts < hi:
            threads.setdefault((ev.pid, ev.tid), []).append(ev)
    ops: list[Op] = []
    launches: dict[int, Launch] = {}
    for key in sorted(threads, key=str):
        items = sorted(threads[key], key=lambda e: (e.ts, -e.dur, e.cat in RUNTIME_CATS,
                                                    e.index))
        _nest_thread(items, label, ops, launches)
    ops.sort(key=lambda o: (o.span.ts, o.span.index))
    return ops, launches


def link_kernels(gpu: list[Event], launches: dict[int, Launch], label: str) -> int:
    """Attach each GPU activity to the top-level op that launched it; returns how many
    were launched outside every CPU op of the step."""
    unlinked = 0
    for ev in gpu:
        corr = correlation(ev, label)
        launch = launches.get(corr) if corr is not None else None
        if launch is not None and ev.ts < launch.event.ts:
            raise InputError(f"GPU activity {ev.name!r} starts at {ev.ts:g} us, before the "
                             f"runtime call that launched it ({launch.event.name!r}, event "
                             f"{launch.event.index}, at {launch.event.ts:g} us)", path=label,
                             field=f"traceEvents[{ev.index}].ts")
        if launch is not None and launch.top is not None:
            launch.top.kernels.append(ev)
        elif launch is not None:
            unlinked += 1
    return unlinked
