"""One rank's trace -> the chosen step's per-gradient rows, collectives and totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.comm_meta import meta_from_args
from gradsched.traces.importers.kineto.events import Event, complete_events
from gradsched.traces.importers.kineto_gpu.attribution import (
    backward_grads,
    forward_ops,
    forward_owner,
    forward_times,
    grad_rows,
    owned_sums,
)
from gradsched.traces.importers.kineto_gpu.batch import batch_from_shapes
from gradsched.traces.importers.kineto_gpu.busy import busy_share, gpu_busy
from gradsched.traces.importers.kineto_gpu.collectives import Collective, to_collective
from gradsched.traces.importers.kineto_gpu.host import host_costs, pending_at_waits
from gradsched.traces.importers.kineto_gpu.modules import (
    forward_times_by_module,
    innermost,
    module_spans,
)
from gradsched.traces.importers.kineto_gpu.nesting import (
    GPU_CATS,
    Op,
    correlation,
    is_nccl,
    link_kernels,
    nest,
)
from gradsched.traces.importers.kineto_gpu.options import Options
from gradsched.traces.importers.kineto_gpu.steps import choose_step, next_step


@dataclass
class GpuStep:
    """What one rank's trace gave for one step."""

    label: str
    rank: int | None
    world_size: int | None
    device: str | None
    step: int
    steps: list[int]
    step_start_us: float
    step_s: float
    frame: pd.DataFrame
    collectives: list[Collective]
    backward_start_us: float | None
    totals: dict[str, Any]
    batch_size: int | None
    batch_note: str
    dtype: str | None
    header: dict[str, Any]
    warnings: list[str]
    host: dict[str, Any] | None = None
    """Host totals when ``Options.host`` (:func:`_host_columns`)."""


def _header_facts(header: dict[str, Any], kernels: list[Event]) -> tuple[Any, Any, Any]:
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"),
                                                        dict) else {}
    device = None
    props = header.get("deviceProperties")
    if isinstance(props, list) and props:
        used = {k.args.get("device") for k in kernels}
        named = [p for p in props if isinstance(p, dict) and p.get("id") in used] or props
        device = named[0].get("name") if isinstance(named[0], dict) else None
    return info.get("rank"), info.get("world_size"), device


def _totals(frame: pd.DataFrame, ops: list[Op], fwd_tail: float, bw_tail: float,
            busy_us: float, step_us: float) -> dict[str, float]:
    """The step's forward, backward, tail, busy and other kernel times (s)."""
    return {
        "forward_s": float(frame["forward_s"].sum()),
        "backward_s": float(frame["backward_s"].sum()),
        "forward_tail_s": fwd_tail, "backward_tail_s": bw_tail,
        "gpu_busy_s": busy_us * 1e-6, "gpu_period_s": step_us * 1e-6,
        "gpu_busy_share": busy_share(busy_us, step_us),
        "other_kernel_s": sum(op.kernel_s() for op in ops) - float(
            frame["forward_s"].sum()) - float(frame["backward_s"].sum()) - bw_tail,
    }


def _forward(events: list[Event], ops: list[Op], fwd_ops: list[Op], owner: dict[int, int],
             step: Event, first_bw: float) -> tuple[dict[int, float], float, dict[str, Any]]:
    """Forward time per owning op: by ``nn.Module`` calls where the trace has them
    (:mod:`.modules`), else since the previous owning op. Also the forward window's kernel
    time (every forward-thread op from the first forward op to the first backward node) and
    the method used."""
    owners = list(owner.values())
    lo = fwd_ops[0].span.ts if fwd_ops else first_bw
    window = sum(op.kernel_s() for op in ops if (op.span.pid, op.span.tid) ==
                 (step.pid, step.tid) and lo <= op.span.ts < first_bw and not op.backward)
    spans = module_spans(events, step.pid, step.tid, lo, first_bw)
    if spans:
        times, tail, inside = forward_times_by_module(fwd_ops, owners,
                                                      innermost(fwd_ops, spans))
        method = "nn.Module calls (python_function events)"
    else:
        times, tail = forward_times(fwd_ops, owners)
        inside = sum(fwd_ops[i].kernel_s() for i in set(owners))
        method = "since the previous parameter-owning op"
    return times, tail, {"forward_window_s": window, "forward_in_layer_s": inside,
                         "forward_method": method}


def parse_gpu_step(doc: Any, label: str, options: Options) -> GpuStep:
    """Read one rank's trace (see the module docstring); nothing is written."""
    events, header = complete_events(doc, label)
    warnings: list[str] = []
    number, step, numbers = choose_step(events, label, options.step, options.step_range)
    ops, launches = nest(events, step.ts, step.end, label)
    gpu = [ev for ev in events if ev.cat in GPU_CATS]
    unlinked = link_kernels(gpu, launches, label)
    by_extid = {ev.args.get("External id"): meta for ev in events
                if ev.name == "record_param_comms" and (meta := meta_from_args(ev, label))}
    fwd_tid = (step.pid, step.tid)
    bw_threads = {(op.span.pid, op.span.tid) for op in ops if op.backward}
    bw_ops = [op for op in ops if (op.span.pid, op.span.tid) in bw_threads]
    if not any(op.accumulate for op in bw_ops):
        raise InputError(f"ProfilerStep#{number} has no backward (no AccumulateGrad op after "
                         "a backward node): nothing to time per gradient", path=label,
                         field=f"traceEvents[{step.index}]")
    first_bw = min(op.span.ts for op in bw_ops if op.backward)
    bw_seqs = [op.backward_seq for op in bw_ops if op.backward_seq is not None]
    lo_seq, hi_seq = min(bw_seqs), max(bw_seqs)
    fwd_ops = forward_ops([op for op in ops if (op.span.pid, op.span.tid) == fwd_tid
                            and op.span.ts < first_bw and not op.backward],
                           lo_seq, hi_seq)
    stray = sum(op.accumulate for op in ops if (op.span.pid, op.span.tid) not in bw_threads)
    if stray:
        warnings.append(f"{stray} AccumulateGrad op(s) ran outside the backward threads "
                        "(no backward node before them there): not rows")
    grads, bw_tail = backward_grads(bw_ops, label)
    owner = forward_owner(grads, fwd_ops, label)
    fwd_time, fwd_tail, fwd_facts = _forward(events, ops, fwd_ops, owner, step, first_bw)
    frame = grad_rows(grads, owner, fwd_time)
    host = None
    if options.host:
        window = [op for op in ops if (op.span.pid, op.span.tid) == fwd_tid
                  and (fwd_ops[0].span.ts if fwd_ops else first_bw) <= op.span.ts < first_bw]
        host = _host_columns(frame, StepOps(events=events, ops=ops, window=window,
                                            fwd_ops=fwd_ops, bw_ops=bw_ops, owner=owner,
                                            step=step), label)
    collectives = [to_collective(k, launches[correlation(k, label)], by_extid, label)
                   for k in gpu if is_nccl(k) and correlation(k, label) in launches]
    collectives.sort(key=lambda c: (c.launch.event.ts, c.kernel.ts))
    step_kernels = [k for op in ops for k in op.kernels]
    if not any(not is_nccl(k) for k in step_kernels):
        raise InputError(f"step {number} launched no GPU kernel, memcpy or memset that the "
                         "trace links to a CPU op (args.correlation of a cuda_runtime call): "
                         "profile with ProfilerActivity.CUDA as well as CPU", path=label,
                         field=f"traceEvents[{step.index}]")
    busy_us, period_us, _ = gpu_busy(events, step_kernels,
                                     next_step(events, step, options.step_range))
    bw_kernels = [k.ts for op in bw_ops for k in op.kernels if not is_nccl(k)]
    rank, world, device = _header_facts(header, step_kernels)
    if unlinked:
        warnings.append(f"{unlinked} GPU activities were launched outside every CPU op of "
                        "the step: not attributed")
    totals = {**_totals(frame, ops, fwd_tail, bw_tail, busy_us, period_us), **fwd_facts}
    batch, batch_note = batch_from_shapes(fwd_ops)
    dtype = next((str(op.param_type) for op in bw_ops if op.param_type), None)
    return GpuStep(label=label, rank=rank, world_size=world, device=device, step=number,
                   steps=numbers, step_start_us=step.ts, step_s=step.dur * 1e-6, frame=frame,
                   collectives=collectives,
                   backward_start_us=min(bw_kernels) if bw_kernels else None,
                   totals=totals, batch_size=batch, batch_note=batch_note, dtype=dtype,
                   header=header, warnings=warnings, host=host)


@dataclass(frozen=True)
class StepOps:
    """The chosen step's events and ops as :func:`parse_gpu_step` splits them: every
    complete event, the step's nested ops, the forward thread's ops from the first forward
    op to the first backward node (``window``), the forward ops, the backward threads' ops,
    each gradient's owning forward op, and the ``ProfilerStep`` event itself."""

    events: list[Event]
    ops: list[Op]
    window: list[Op]
    fwd_ops: list[Op]
    bw_ops: list[Op]
    owner: dict[int, int]
    step: Event


def _host_columns(frame: pd.DataFrame, parsed: StepOps, label: str) -> dict[str, Any]:
    """Add ``host_forward_s``, ``host_backward_s``, ``forward_launches`` and
    ``backward_launches`` to ``frame`` (:mod:`.host`); return the sidecar's host facts."""
    events, ops, window, step = parsed.events, parsed.ops, parsed.window, parsed.step
    fwd_ops, bw_ops, owner = parsed.fwd_ops, parsed.bw_ops, parsed.owner
    first_bw = min((op.span.ts for op in bw_ops if op.backward), default=step.end)
    costs = host_costs(ops, events, step.ts, step.end, ((step.pid, step.tid), first_bw))

    def host(op: Op) -> float:
        return costs[id(op)].host_s

    def launches(op: Op) -> float:
        return costs[id(op)].launches

    owners = set(owner.values())
    fwd_host, fwd_tail = owned_sums(window, fwd_ops, owners, host)
    fwd_launch, _ = owned_sums(window, fwd_ops, owners, launches)
    bw_host, bw_tail = backward_grads(bw_ops, label, host)
    bw_launch, bw_launch_tail = backward_grads(bw_ops, label, launches)
    first = ~frame["op_index"].duplicated()
    ops_of = frame["op_index"]
    by_ready = {g.ready: g.backward_s for g in bw_host}
    launch_by_ready = {g.ready: g.backward_s for g in bw_launch}
    frame["host_forward_s"] = [round(fwd_host[o], 9) if f else 0.0
                               for o, f in zip(ops_of, first, strict=True)]
    frame["host_backward_s"] = [round(by_ready[r], 9) for r in frame["ready_order"]]
    frame["forward_launches"] = [int(fwd_launch[o]) if f else 0
                                 for o, f in zip(ops_of, first, strict=True)]
    frame["backward_launches"] = [int(launch_by_ready[r]) for r in frame["ready_order"]]
    waited = sum(costs[id(op)].waited_s for op in window + bw_ops)
    return {
        "host_forward_total_s": round(float(frame["host_forward_s"].sum()), 9),
        "host_backward_total_s": round(float(frame["host_backward_s"].sum()), 9),
        "host_forward_tail_s": round(fwd_tail, 9),
        "host_backward_tail_s": round(bw_tail, 9),
        "host_waited_s": round(waited, 9),
        "backward_tail_launches": int(bw_launch_tail),
        "launch_queue_pending_at_waits": pending_at_waits(events),
    }
