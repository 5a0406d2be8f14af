"""Kineto GPU traces -> a per-gradient compute trace and the comm record of one training step.

``gradsched import kineto TRACE --compute-out C.csv [--comm-out M.csv]`` (and the manifest's
``kineto-gpu`` importer) read a PyTorch profiler trace of a GPU training run in either schema:

* the new one (``cat`` ``cpu_op`` / ``cuda_runtime`` / ``kernel`` / ``gpu_memcpy`` /
  ``gpu_memset``; backward nodes wrapped in ``autograd::engine::evaluate_function: XBackward0``;
  the HolisticTraceAnalysis and PARAM test traces), and
* the old one (``cat`` ``Operator`` / ``Runtime`` / ``Kernel`` / ``Memcpy`` / ``Memset``;
  backward nodes are top-level ``XBackward`` operators; the kineto tb_plugin samples).

How the trace is read (the links PyTorch's profiler records, see kineto's
``libkineto/src/output_json.cpp`` and HTA's ``hta/common/trace_call_graph.py``):

1. One ``ProfilerStep#N`` span is used (``step`` picks it; by default the lower-median-length
   step among those with a backward, leaving out the first profiled step when there are three
   or more: it often holds warm-up work).
2. On every CPU thread, CPU ops nest by time; a *top-level op* is one not inside another CPU
   op (annotations such as ``ProfilerStep#N``, ``## forward ##`` or
   ``DistributedDataParallel.forward`` do not count as enclosing ops). Each GPU activity is
   linked to its launching runtime call by ``args.correlation``, and the runtime call to the
   top-level op that encloses it on its thread (the ``External id`` of the runtime call names
   the innermost op; enclosing by time gives the same op and also its ancestors).
3. Backward nodes are top-level ops named ``autograd::engine::evaluate_function: ...`` or
   carrying a non-zero ``Fwd thread id`` (old schema; forward ops record 0); gradient
   accumulations are top-level ops whose name ends in ``AccumulateGrad``. A node's
   ``Sequence number`` links it to the forward op that created it: the last top-level op on
   the forward thread (the thread of the ProfilerStep span) recording that number (old
   PyTorch also stamps ops that create no node with the current number).
4. Backward: walking the backward threads' top-level ops in launch order, the GPU kernel time
   (kernels, memcpy, memset; NCCL kernels excluded) of everything launched after one
   AccumulateGrad up to and including the next is that gradient's ``backward_s``, so the
   rows' sum is the backward kernel time up to the last gradient (``backward_tail_s`` in the
   sidecar is what follows it). The order of the AccumulateGrad ops is ``ready_order``.
5. Forward: the forward thread's top-level ops before the first backward node, from the op
   that created the lowest-numbered backward node on, that record a sequence number within
   the backward nodes' range (the autograd-recorded forward: data copies and ``zero_grad``
   are not) are walked in order; the kernel time since the previous parameter-owning op goes
   to the first row of the next op owning parameters. Kernel time after the last such op
   (the loss) goes to the last owning op and is stated as ``forward_tail_s``.
6. Rows (one per gradient) are in forward order: by the forward op owning them, and within
   one op in the reverse of their accumulation order (autograd accumulates a linear layer's
   bias before its weight). ``layer`` numbers the owning forward ops.
7. Parameter sizes come from the AccumulateGrad op's ``Input Dims`` / ``Input type`` where
   the trace was recorded with shapes; otherwise (and for names) from a parameter table
   (``params``: a CSV with ``name`` and ``numel`` and optionally ``bytes``, in forward order,
   e.g. a compute trace of the same model). Where both exist they must agree row by row.
8. NCCL kernels launched inside the step are its collectives. Their metadata comes from the
   kernel's own args (``Collective name``, ``In msg nelems``, ``Out msg nelems``,
   ``Group size``, ``dtype``), else from the ``record_param_comms`` op with the same
   ``External id``, else from the ``nccl:<op>`` annotation enclosing the launch
   (``Input Dims`` x ``Input type``). ``bytes`` = max(in, out) elements x dtype size, as in
   :mod:`.kineto`.
9. GPU busy share = union of the step's non-NCCL GPU activity / the step's wall time. Below
   ``cpu_bound_share`` (0.8) the step is CPU-bound: the kernels' durations are still GPU
   times, but the step's length was set by the CPU; the sidecar says so and a warning is
   raised. Below 0.8 the GPU waits more than a fifth of the step; a GPU-bound step is at
   ~0.99 (the V100 ResNet-50 trace of HTA's tests), the HTA DDP trace at 0.18.
10. DDP buckets: when the step all-reduces, the sidecar checks that the all-reduce sizes
   partition the gradients taken in ready order (DDP fills buckets in the reverse of the
   parameters' registration order, ``torch/nn/parallel/distributed.py``
   ``_compute_bucket_assignment_by_size``), which also checks a parameter table.

Several ranks of one step (a ``.tar.gz`` of traces, one per rank): the collectives of all ranks
go to one comm record. Ranks are aligned on their common collective sequence: a collective
ends at the same moment on every rank, so a rank's clock offset is the median difference of
its collectives' end times from those of the lowest rank.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_bytes, read_json, write_csv_atomic, write_json_atomic
from gradsched.traces.bundle import ComputeTrace, meta_path
from gradsched.traces.importers import ImportResult, WarningSink
from gradsched.traces.importers.kineto import (
    _KERNEL_OP,
    _NCCL_KERNEL_RE,
    _STEP_RE,
    COLLECTIVE_COLUMNS,
    DTYPE_BYTES,
    _Event,
    _events,
    _meta_from_args,
    _shape_bytes,
    decode_trace_bytes,
    normalise_collective,
    union,
)

IMPORTER = "kineto-gpu"
RECORD_KIND = "kineto-comm-record"
IMPORTER_VERSION = "1"

GPU_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver"})
CPU_CATS = frozenset({"cpu_op", "Operator", "user_annotation"})
_EVALUATE = "autograd::engine::evaluate_function:"
_CONV_OPS = frozenset({"aten::conv2d", "aten::convolution", "aten::_convolution",
                       "aten::cudnn_convolution"})

RECORD_COLUMNS = [*COLLECTIVE_COLUMNS, "launch_order", "start_after_backward_s",
                  "clock_offset_s"]
"""The comm record: the columns of :mod:`.kineto`'s ``PREFIX.collectives.csv`` plus the
launch order, the start relative to the rank's backward start and the rank's clock offset."""


@dataclass
class Options:
    """What the trace does not say (manifest ``args``)."""

    model: str = "unknown"
    step: int | None = None
    rank: int | None = None
    params: str | None = None
    batch_size: int | None = None
    world_size: int | None = None
    device: str | None = None
    source: str | None = None
    hardware: str | None = None
    date: str = "not recorded in the trace"
    note: str | None = None
    cpu_bound_share: float = 0.8


# ----------------------------------------------------------------------------- reading
def read_documents(path: str | Path) -> list[tuple[str, Any]]:
    """``[(label, trace document)]``: one for a trace file, one per member of a tar archive.

    Tar members are read in memory (no extraction), in name order; labels are
    ``ARCHIVE:MEMBER`` so errors name both.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    if not (path.name.endswith((".tar.gz", ".tgz", ".tar"))):
        return [(str(path), decode_trace_bytes(read_bytes(path), path))]
    try:
        with tarfile.open(path) as archive:
            members = sorted((m for m in archive.getmembers() if m.isfile()),
                             key=lambda m: m.name)
            raw = [(m.name, archive.extractfile(m).read()) for m in members]  # type: ignore[union-attr]
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"corrupt or truncated tar archive: {exc}", path=path) from None
    if not raw:
        raise InputError("tar archive holds no files", path=path)
    return [(f"{path}:{name}", decode_trace_bytes(data, f"{path}:{name}"))
            for name, data in raw]


# ----------------------------------------------------------------------------- model
@dataclass
class _Op:
    """A top-level CPU op of the step and what hangs off it."""

    span: _Event
    seqs: list[int] = field(default_factory=list)
    backward_seq: int | None = None
    accumulate: bool = False
    param_dims: Any = None
    param_type: Any = None
    kernels: list[_Event] = field(default_factory=list)

    @property
    def backward(self) -> bool:
        return self.backward_seq is not None

    def kernel_s(self) -> float:
        """GPU time of the op's non-NCCL activities (s)."""
        return sum(k.dur for k in self.kernels if not _is_nccl(k)) * 1e-6


@dataclass
class _Launch:
    """A runtime call: its top-level op and the CPU spans around it (innermost last)."""

    event: _Event
    top: _Op | None
    stack: list[_Event]


@dataclass
class Collective:
    """One NCCL kernel of the step."""

    kernel: _Event
    launch: _Launch
    collective: str
    nelems: int | None
    nbytes: int | None
    dtype: str | None
    group: int | None


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
    totals: dict[str, float]
    batch_size: int | None
    dtype: str | None
    header: dict[str, Any]
    warnings: list[str]


def _is_nccl(ev: _Event) -> bool:
    return ev.cat in ("kernel", "Kernel") and bool(_NCCL_KERNEL_RE.match(ev.name))


def _is_annotation(ev: _Event) -> bool:
    return (ev.cat == "user_annotation" or bool(_STEP_RE.match(ev.name))
            or ev.name.startswith("##"))


def _seq(ev: _Event, label: str) -> int | None:
    value = ev.args.get("Sequence number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"'Sequence number' must be an integer, got {value!r}", path=label,
                         field=f"traceEvents[{ev.index}].args.Sequence number")
    return value


def _correlation(ev: _Event, label: str) -> int | None:
    value = ev.args.get("correlation")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"'correlation' must be an integer, got {value!r}", path=label,
                         field=f"traceEvents[{ev.index}].args.correlation")
    return value


# ----------------------------------------------------------------------------- nesting
def _note_span(top: _Op, ev: _Event, label: str) -> None:
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


def _nest_thread(items: list[_Event], label: str, ops: list[_Op],
                 launches: dict[int, _Launch]) -> None:
    """Sweep one thread's CPU spans and runtime calls (sorted) into top-level ops."""
    stack: list[_Event] = []
    top: _Op | None = None
    for ev in items:
        while stack and stack[-1].end <= ev.ts and stack[-1].ts != ev.ts:
            stack.pop()
        if not any(not _is_annotation(s) for s in stack):
            top = None
        if ev.cat in RUNTIME_CATS:
            corr = _correlation(ev, label)
            if corr is not None:
                launches[corr] = _Launch(ev, top, list(stack))
            continue
        if top is None and not _is_annotation(ev):
            top = _Op(ev)
            ops.append(top)
        if top is not None:
            _note_span(top, ev, label)
        stack.append(ev)


def _nest(events: list[_Event], lo: float, hi: float, label: str
          ) -> tuple[list[_Op], dict[int, _Launch]]:
    """Top-level ops and launches of the CPU threads inside ``[lo, hi)`` (us)."""
    threads: dict[Any, list[_Event]] = {}
    for ev in events:
        if (ev.cat in CPU_CATS or ev.cat in RUNTIME_CATS) and lo <= ev.ts < hi:
            threads.setdefault((ev.pid, ev.tid), []).append(ev)
    ops: list[_Op] = []
    launches: dict[int, _Launch] = {}
    for key in sorted(threads, key=str):
        items = sorted(threads[key], key=lambda e: (e.ts, -e.dur, e.cat in RUNTIME_CATS,
                                                    e.index))
        _nest_thread(items, label, ops, launches)
    ops.sort(key=lambda o: (o.span.ts, o.span.index))
    return ops, launches


# ----------------------------------------------------------------------------- steps
def _steps(events: list[_Event], label: str) -> list[tuple[int, _Event]]:
    steps = sorted(((int(m.group(1)), ev) for ev in events
                    if (m := _STEP_RE.match(ev.name))), key=lambda s: s[1].ts)
    if not steps:
        raise InputError("no ProfilerStep#N spans: the GPU import needs one training step "
                         "(profile with a schedule and call prof.step())", path=label,
                         field="traceEvents")
    return steps


def _has_backward(events: list[_Event], step: _Event) -> bool:
    return any(ev.name.endswith("AccumulateGrad") and step.ts <= ev.ts < step.end
               for ev in events)


def choose_step(events: list[_Event], label: str, wanted: int | None) -> tuple[int, _Event,
                                                                                list[int]]:
    """The step to import: ``wanted``, else the lower-median-length step with a backward
    (the first profiled step left out when three or more have one)."""
    steps = _steps(events, label)
    numbers = [n for n, _ in steps]
    if wanted is not None:
        for number, ev in steps:
            if number == wanted:
                return number, ev, numbers
        raise InputError(f"no ProfilerStep#{wanted} (the trace has steps "
                         f"{', '.join(map(str, numbers))})", path=label, field="step")
    with_bwd = [(n, ev) for n, ev in steps if _has_backward(events, ev)]
    if not with_bwd:
        raise InputError(f"no backward in any of the steps {', '.join(map(str, numbers))} "
                         "(no AccumulateGrad op): not a training trace", path=label,
                         field="traceEvents")
    if len(with_bwd) >= 3:
        with_bwd = with_bwd[1:]
    ranked = sorted(with_bwd, key=lambda s: (s[1].dur, s[1].ts))
    number, ev = ranked[(len(ranked) - 1) // 2]
    return number, ev, numbers


# ----------------------------------------------------------------------------- collectives
def _annotation_meta(launch: _Launch) -> dict[str, Any] | None:
    """Collective metadata from the ``nccl:<op>`` span around a launch (Input Dims)."""
    for span in reversed(launch.stack):
        if span.name.startswith("nccl:"):
            nelems, _, dtype = _shape_bytes(span)
            return {"collective": normalise_collective(span.name[5:]), "in": nelems,
                    "out": None, "group": None, "dtype": dtype}
    return None


def _collective(kernel: _Event, launch: _Launch, by_extid: dict[Any, dict[str, Any]],
                label: str) -> Collective:
    meta = (_meta_from_args(kernel, label) or by_extid.get(kernel.args.get("External id"))
            or by_extid.get(launch.event.args.get("External id"))
            or _annotation_meta(launch))
    if meta is None:
        match = _NCCL_KERNEL_RE.match(kernel.name)
        op = match.group(1) if match else "unknown"
        meta = {"collective": _KERNEL_OP.get(op, op.lower()), "in": None, "out": None,
                "group": None, "dtype": None}
    counts = [c for c in (meta["in"], meta["out"]) if c is not None]
    nelems = max(counts) if counts else None
    size = DTYPE_BYTES.get(str(meta["dtype"]))
    nbytes = nelems * size if nelems is not None and size is not None else None
    return Collective(kernel, launch, meta["collective"], nelems, nbytes,
                      None if meta["dtype"] is None else str(meta["dtype"]), meta["group"])


# ----------------------------------------------------------------------------- rows
@dataclass
class _Grad:
    node_seq: int
    acc: _Op
    backward_s: float
    ready: int


def _backward_grads(bw_ops: list[_Op], label: str) -> tuple[list[_Grad], float]:
    """Walk the backward ops; each AccumulateGrad closes one gradient. Returns the tail."""
    grads: list[_Grad] = []
    pending = 0.0
    node: int | None = None
    for op in bw_ops:
        pending += op.kernel_s()
        if op.backward:
            node = op.backward_seq
        elif op.accumulate:
            if node is None:
                raise InputError("an AccumulateGrad op runs before any backward node",
                                 path=label, field=f"traceEvents[{op.span.index}]")
            grads.append(_Grad(node, op, pending, len(grads)))
            pending = 0.0
    return grads, pending


def _last_recorder(ops: list[_Op]) -> dict[int, int]:
    """Sequence number -> index of the last op recording it.

    The autograd node of a forward op takes the current sequence number and advances it;
    old PyTorch also stamps the ops that create no node with the current (not yet taken)
    number, so the op that created node ``n`` is the last one recording ``n``.
    """
    out: dict[int, int] = {}
    for i, op in enumerate(ops):
        for seq in op.seqs:
            out[seq] = i
    return out


def _forward_ops(candidates: list[_Op], lo: int, hi: int) -> list[_Op]:
    """The forward: from the op that created the first backward node's forward
    counterpart on, the ops recording a sequence number within the backward's range."""
    recorder = _last_recorder(candidates)
    starts = [recorder[s] for s in range(lo, hi + 1) if s in recorder]
    if not starts:
        return []
    return [op for op in candidates[min(starts):] if any(lo <= s <= hi for s in op.seqs)]


def _forward_owner(grads: list[_Grad], fwd_ops: list[_Op], label: str) -> dict[int, int]:
    """Gradient ready index -> index of the forward op that recorded its node's sequence."""
    seq_to_op = _last_recorder(fwd_ops)
    owner: dict[int, int] = {}
    for grad in grads:
        if grad.node_seq not in seq_to_op:
            raise InputError(f"backward node with Sequence number {grad.node_seq} has no "
                             "forward op with that number in the step", path=label,
                             field=f"traceEvents[{grad.acc.span.index}]")
        owner[grad.ready] = seq_to_op[grad.node_seq]
    return owner


def _forward_times(fwd_ops: list[_Op], owners: list[int]) -> tuple[dict[int, float], float]:
    """Forward kernel time per owning op (time since the previous owner), plus the tail."""
    owned = set(owners)
    out: dict[int, float] = {}
    pending = 0.0
    last = None
    for i, op in enumerate(fwd_ops):
        pending += op.kernel_s()
        if i in owned:
            out[i] = pending
            pending = 0.0
            last = i
    if last is not None:
        out[last] += pending
    return out, pending


def _shape_numel(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    return int(np.prod(dims)) if dims else 1


# ----------------------------------------------------------------------------- parse
def _header_facts(header: dict[str, Any], kernels: list[_Event]) -> tuple[Any, Any, Any]:
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"),
                                                        dict) else {}
    device = None
    props = header.get("deviceProperties")
    if isinstance(props, list) and props:
        used = {k.args.get("device") for k in kernels}
        named = [p for p in props if isinstance(p, dict) and p.get("id") in used] or props
        device = named[0].get("name") if isinstance(named[0], dict) else None
    return info.get("rank"), info.get("world_size"), device


def parse_gpu_step(doc: Any, label: str, options: Options) -> GpuStep:
    """Read one rank's trace (see the module docstring); nothing is written."""
    events, header = _events(doc, label)
    warnings: list[str] = []
    number, step, numbers = choose_step(events, label, options.step)
    ops, launches = _nest(events, step.ts, step.end, label)
    gpu = [ev for ev in events if ev.cat in GPU_CATS]
    unlinked = 0
    for ev in gpu:
        corr = _correlation(ev, label)
        launch = launches.get(corr) if corr is not None else None
        if launch is not None and launch.top is not None:
            launch.top.kernels.append(ev)
        elif launch is not None:
            unlinked += 1
    by_extid = {ev.args.get("External id"): meta for ev in events
                if ev.name == "record_param_comms" and (meta := _meta_from_args(ev, label))}
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
    fwd_ops = _forward_ops([op for op in ops if (op.span.pid, op.span.tid) == fwd_tid
                            and op.span.ts < first_bw and not op.backward],
                           lo_seq, hi_seq)
    stray = sum(op.accumulate for op in ops if (op.span.pid, op.span.tid) not in bw_threads)
    if stray:
        warnings.append(f"{stray} AccumulateGrad op(s) ran outside the backward threads "
                        "(no backward node before them there): not rows")
    grads, bw_tail = _backward_grads(bw_ops, label)
    owner = _forward_owner(grads, fwd_ops, label)
    fwd_time, fwd_tail = _forward_times(fwd_ops, list(owner.values()))
    frame = _rows(grads, owner, fwd_time)
    collectives = [_collective(k, launches[_correlation(k, label)], by_extid, label)
                   for k in gpu if _is_nccl(k) and _correlation(k, label) in launches]
    collectives.sort(key=lambda c: (c.launch.event.ts, c.kernel.ts))
    step_kernels = [k for op in ops for k in op.kernels]
    busy_us = sum(e - s for s, e in union((k.ts, k.end) for k in step_kernels
                                          if not _is_nccl(k)))
    bw_kernels = [k.ts for op in bw_ops for k in op.kernels if not _is_nccl(k)]
    rank, world, device = _header_facts(header, step_kernels)
    if unlinked:
        warnings.append(f"{unlinked} GPU activities were launched outside every CPU op of "
                        "the step: not attributed")
    totals = {
        "forward_s": float(frame["forward_s"].sum()),
        "backward_s": float(frame["backward_s"].sum()),
        "forward_tail_s": fwd_tail, "backward_tail_s": bw_tail,
        "gpu_busy_s": busy_us * 1e-6, "gpu_busy_share": busy_us / step.dur if step.dur else 0.0,
        "other_kernel_s": sum(op.kernel_s() for op in ops) - float(
            frame["forward_s"].sum()) - float(frame["backward_s"].sum()) - bw_tail,
    }
    batch = _batch_from_shapes(fwd_ops)
    dtype = next((str(op.param_type) for op in bw_ops if op.param_type), None)
    return GpuStep(label=label, rank=rank, world_size=world, device=device, step=number,
                   steps=numbers, step_start_us=step.ts, step_s=step.dur * 1e-6, frame=frame,
                   collectives=collectives,
                   backward_start_us=min(bw_kernels) if bw_kernels else None,
                   totals=totals, batch_size=batch, dtype=dtype, header=header,
                   warnings=warnings)


def _rows(grads: list[_Grad], owner: dict[int, int], fwd_time: dict[int, float]
          ) -> pd.DataFrame:
    """One row per gradient in forward order (see the module docstring, item 6)."""
    order = sorted(grads, key=lambda g: (owner[g.ready], -g.ready))
    layers = {op: k for k, op in enumerate(sorted(set(owner.values())))}
    rows = []
    seen: set[int] = set()
    for grad in order:
        op = owner[grad.ready]
        rows.append({
            "op_index": op, "layer": layers[op], "ready_order": grad.ready,
            "forward_s": fwd_time[op] if op not in seen else 0.0,
            "backward_s": grad.backward_s,
            "trace_numel": _shape_numel(grad.acc.param_dims),
            "trace_dtype": grad.acc.param_type,
            "node": grad.acc.span.name,
        })
        seen.add(op)
    return pd.DataFrame(rows)


def _batch_from_shapes(fwd_ops: list[_Op]) -> int | None:
    """Batch size: the leading input dimension of the first forward op when that op is a
    convolution (image models; recorded with ``record_shapes``), else None."""
    if not fwd_ops or fwd_ops[0].span.name not in _CONV_OPS:
        return None
    dims = fwd_ops[0].span.args.get("Input Dims")
    if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0]:
        first = dims[0][0]
        return first if isinstance(first, int) and first > 0 else None
    return None


# ----------------------------------------------------------------------------- parameters
def read_param_table(path: str | Path) -> pd.DataFrame:
    """A parameter table: ``name``, ``numel`` (and optionally ``bytes``) per row, in forward
    order (a compute trace of the same model is one)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("parameter table not found", path=path)
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a CSV table: {exc}", path=path) from None
    for column in ("name", "numel"):
        if column not in table.columns:
            raise InputError(f"no '{column}' column", path=path, row=0, field=column)
    numel = pd.to_numeric(table["numel"], errors="coerce")
    bad = np.flatnonzero(~(numel > 0).to_numpy())
    if bad.size:
        raise InputError("numel must be a positive integer", path=path,
                         row=int(bad[0]) + 1, line=int(bad[0]) + 2, field="numel")
    out = pd.DataFrame({"name": table["name"].astype(str), "numel": numel.astype(np.int64)})
    if "bytes" in table.columns:
        out["bytes"] = pd.to_numeric(table["bytes"], errors="coerce").astype("Int64")
    return out


def _sizes(frame: pd.DataFrame, table: pd.DataFrame | None, label: str, table_path: str | None
           ) -> tuple[list[str], list[int], list[int], str]:
    """Names, element counts, bytes of the rows and where they came from."""
    n = len(frame)
    from_trace = frame["trace_numel"].notna().all()
    if table is not None and len(table) != n:
        raise InputError(f"the parameter table has {len(table)} rows, the trace's step has "
                         f"{n} gradients", path=table_path, field="name")
    if table is not None and from_trace:
        for i, (mine, theirs) in enumerate(zip(frame["trace_numel"], table["numel"],
                                               strict=True)):
            if int(mine) != int(theirs):
                raise InputError(f"row {table['name'].iloc[i]!r} has {theirs} elements, the "
                                 f"trace's gradient {i} (forward order) has {int(mine)}",
                                 path=table_path, row=i + 1, line=i + 2, field="numel")
    if table is None and not from_trace:
        raise InputError("the trace records no parameter shapes (no 'Input Dims' on "
                         "AccumulateGrad; profile with record_shapes=True) and no parameter "
                         "table was given (params)", path=label, field="params")
    if table is not None:
        numel = [int(v) for v in table["numel"]]
        names = list(table["name"])
        if "bytes" in table.columns and table["bytes"].notna().all():
            nbytes = [int(v) for v in table["bytes"]]
        else:
            nbytes = [v * _elem(frame, i) for i, v in enumerate(numel)]
        where = ("names and sizes from the parameter table, checked row by row against the "
                 "trace's AccumulateGrad shapes" if from_trace else
                 "names and sizes from the parameter table (the trace records no shapes; "
                 "only the gradient count is checked against it)")
        return names, numel, nbytes, where
    numel = [int(v) for v in frame["trace_numel"]]
    names = [f"layer{int(layer):03d}.p{k}" for layer, k in
             zip(frame["layer"], frame.groupby("layer").cumcount(), strict=True)]
    nbytes = [v * _elem(frame, i) for i, v in enumerate(numel)]
    return names, numel, nbytes, ("sizes from the AccumulateGrad ops' Input Dims; names are "
                                  "synthetic (layerNNN.pK: K-th parameter of the forward op)")


def _elem(frame: pd.DataFrame, i: int) -> int:
    """Element size of row ``i`` from the AccumulateGrad's Input type (fp32 if absent)."""
    return DTYPE_BYTES.get(str(frame["trace_dtype"].iloc[i]), 4)


# ----------------------------------------------------------------------------- outputs
@dataclass
class CommRecord:
    """The collectives of one step (one or more ranks): a CSV plus its sidecar."""

    frame: pd.DataFrame
    meta: dict[str, Any]

    def save(self, path: str | Path) -> None:
        """Write ``path`` and ``<stem>.meta.json`` atomically."""
        write_csv_atomic(path, self.frame)
        write_json_atomic(meta_path(path), self.meta)

    @classmethod
    def load(cls, path: str | Path) -> CommRecord:
        """Read a record and its sidecar back, checking the columns and the kind."""
        path = Path(path)
        meta = read_json(meta_path(path), missing="metadata sidecar is missing")
        if not isinstance(meta, dict) or meta.get("kind") != RECORD_KIND:
            raise InputError(f"sidecar kind must be {RECORD_KIND!r}", path=meta_path(path),
                             field="kind")
        try:
            frame = pd.read_csv(path)
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"not a CSV table: {exc}", path=path) from None
        if list(frame.columns) != RECORD_COLUMNS:
            raise InputError(f"columns must be {RECORD_COLUMNS}", path=path, row=0)
        return cls(frame, meta)


@dataclass
class KinetoGpuResult(ImportResult):
    """An :class:`ImportResult` with the step's comm record and the per-rank steps."""

    comm_record: CommRecord | None = None
    steps: list[GpuStep] = field(default_factory=list)


def _collective_rows(gstep: GpuStep, offset_us: float) -> list[dict[str, Any]]:
    rows = []
    for k, c in enumerate(gstep.collectives):
        rows.append({
            "file": Path(gstep.label.rsplit(":", 1)[-1]).name, "rank": gstep.rank,
            "iteration": gstep.step, "collective": c.collective, "bytes": c.nbytes,
            "world_size": c.group or gstep.world_size,
            "start_s": (c.kernel.ts - gstep.step_start_us) * 1e-6,
            "duration_s": c.kernel.dur * 1e-6, "recorded_duration_s": c.kernel.dur * 1e-6,
            "stream": f"stream {c.kernel.args.get('stream', c.kernel.tid)}",
            "source": "nccl-kernel", "dtype": c.dtype, "nelems": c.nelems,
            "launch_order": k,
            "start_after_backward_s": (None if gstep.backward_start_us is None else
                                       (c.kernel.ts - gstep.backward_start_us) * 1e-6),
            "clock_offset_s": offset_us * 1e-6,
        })
    return rows


def align_ranks(steps: list[GpuStep]) -> tuple[dict[int, float], list[tuple[str, Any]],
                                               dict[int, float]]:
    """Clock offsets (us) of each rank vs the lowest rank, the common collective sequence and
    each rank's largest residual (us) after alignment.

    A collective ends at about the same moment on all ranks (each rank's kernel waits for the
    others), so offset = median over the common sequence of (end on rank - end on the
    reference). The sequences (collective, elements) must agree rank by rank.
    """
    ref = min(steps, key=lambda g: (g.rank if g.rank is not None else 1 << 30))
    sequence = [(c.collective, c.nelems) for c in ref.collectives]
    offsets: dict[int, float] = {}
    residual: dict[int, float] = {}
    for g in steps:
        mine = [(c.collective, c.nelems) for c in g.collectives]
        if mine != sequence:
            raise InputError(f"rank {g.rank}'s collective sequence {mine} differs from rank "
                             f"{ref.rank}'s {sequence}: the files are not one step of one "
                             "job", path=g.label, field="traceEvents")
        diffs = np.array([c.kernel.end - r.kernel.end
                          for c, r in zip(g.collectives, ref.collectives, strict=True)])
        offset = float(np.median(diffs)) if diffs.size else 0.0
        offsets[int(g.rank or 0)] = offset
        residual[int(g.rank or 0)] = float(np.max(np.abs(diffs - offset))) if diffs.size \
            else 0.0
    return offsets, sequence, residual


def _provenance(options: Options, label: str) -> str:
    return options.source or f"Kineto trace {Path(label).name}"


def build_compute(gstep: GpuStep, options: Options, path: str | Path, sink: WarningSink
                  ) -> ComputeTrace:
    """The compute trace of one rank's step (checked and validated)."""
    table = read_param_table(options.params) if options.params else None
    names, numel, nbytes, sizes_from = _sizes(gstep.frame, table, gstep.label,
                                              options.params)
    frame = pd.DataFrame({
        "name": names, "layer": gstep.frame["layer"].astype(int), "numel": numel,
        "bytes": nbytes, "forward_s": gstep.frame["forward_s"].astype(float),
        "backward_s": gstep.frame["backward_s"].astype(float),
        "ready_order": gstep.frame["ready_order"].astype(int),
    })
    batch = options.batch_size or gstep.batch_size
    if batch is None:
        raise InputError("batch size not recorded (no shapes on a leading convolution): "
                         "pass batch_size", path=gstep.label, field="batch_size")
    totals = {k: round(v, 9) for k, v in gstep.totals.items()}  # ns resolution
    share = totals["gpu_busy_share"]
    cpu_bound = share < options.cpu_bound_share
    if cpu_bound:
        sink.warn(f"ProfilerStep#{gstep.step} is CPU-bound: the GPU is busy "
                  f"{totals['gpu_busy_s'] * 1e3:.1f} ms of the step's "
                  f"{gstep.step_s * 1e3:.1f} ms ({share:.0%} < {options.cpu_bound_share:.0%}); "
                  "the rows are GPU kernel times, but the run's iteration time was set by the "
                  "CPU (cpu_bound in the sidecar)")
    for message in gstep.warnings:
        sink.warn(message)
    buckets = _bucket_check(gstep, frame, sink)
    elem = {b // n for b, n in zip(nbytes, numel, strict=True)}
    meta = {
        "kind": "compute", "model": options.model, "batch_size": int(batch),
        "device": options.device or gstep.device or "not recorded in the trace",
        "dtype": {4: "fp32", 2: "fp16/bf16", 8: "fp64"}.get(next(iter(elem)), "mixed")
        if len(elem) == 1 else "mixed",
        "world_size": int(options.world_size or gstep.world_size or 1),
        "software": _software(gstep.header),
        "capture_method": ("PyTorch profiler (Kineto) GPU trace; per-gradient GPU kernel time "
                           "of one ProfilerStep (gradsched kineto-gpu importer)"),
        "iterations": 1, "date": options.date, "source": _provenance(options, gstep.label),
        "iteration_s": gstep.step_s,
        "forward_backward_s": round(totals["forward_s"] + totals["backward_s"], 9),
        "step": gstep.step, "steps_in_trace": gstep.steps,
        "step_choice": ("given (step option)" if options.step is not None else
                        "lower-median-length step with a backward, the first profiled step "
                        "left out when three or more have one"),
        "rank": gstep.rank, "forward_total_s": totals["forward_s"],
        "backward_total_s": totals["backward_s"], "forward_tail_s": totals["forward_tail_s"],
        "backward_tail_s": totals["backward_tail_s"],
        "other_kernel_s": totals["other_kernel_s"], "gpu_busy_s": totals["gpu_busy_s"],
        "gpu_busy_share": share, "cpu_bound": cpu_bound,
        "cpu_bound_share": options.cpu_bound_share, "parameter_sizes": sizes_from,
        "forward_measured": True, "original_file": Path(path).name,
        "importer": IMPORTER, "importer_version": IMPORTER_VERSION,
        "notes": _notes(options, gstep),
        "warnings": sink.for_meta(),
    }
    if buckets:
        meta["ddp_buckets"] = buckets
    if options.hardware:
        meta["hardware"] = options.hardware
    if gstep.label.startswith(f"{path}:"):
        meta["archive_member"] = gstep.label[len(str(path)) + 1:]
    return ComputeTrace.from_frame(frame, meta)


def _bucket_check(gstep: GpuStep, frame: pd.DataFrame, sink: WarningSink
                  ) -> dict[str, Any] | None:
    """Do the step's all-reduce sizes partition the gradients taken in ready order?"""
    sizes = [c.nelems for c in gstep.collectives if c.collective == "all_reduce"]
    if not sizes or any(n is None for n in sizes):
        return None
    ready = frame.sort_values("ready_order")["numel"].to_numpy()
    bounds = np.cumsum(ready)
    counts = []
    done = 0
    for total in np.cumsum(sizes):
        hit = np.flatnonzero(bounds == total)
        if not hit.size:
            sink.warn(f"the all-reduce sizes {sizes} do not partition the gradients taken in "
                      "ready order (DDP fills buckets in reverse registration order, which "
                      "can differ from the ready order; or not these parameters' buckets, or "
                      "a wrong parameter table)")
            return {"elements": sizes, "partition_ready_order": False}
        counts.append(int(hit[0]) + 1 - done)
        done = int(hit[0]) + 1
    if done != len(ready):
        sink.warn(f"the all-reduces cover {done} of {len(ready)} gradients")
    return {"elements": sizes, "partition_ready_order": done == len(ready),
            "gradients_per_bucket": counts}


def _software(header: dict[str, Any]) -> dict[str, Any]:
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"),
                                                        dict) else {}
    out: dict[str, Any] = {"framework": "PyTorch (Kineto profiler trace)"}
    if header.get("schemaVersion") is not None:
        out["trace_schema_version"] = header["schemaVersion"]
    for key in ("backend", "nccl_version"):
        if info.get(key):
            out[key] = info[key]
    return out


def _notes(options: Options, gstep: GpuStep) -> str:
    text = (f"Rows: one per gradient (AccumulateGrad) of ProfilerStep#{gstep.step}, forward "
            "order. backward_s = GPU kernel time (kernels, memcpy, memset; NCCL excluded) of "
            "the backward ops launched after the previous AccumulateGrad up to this one; "
            "forward_s = forward kernel time since the previous parameter-owning forward op "
            "(on the op's first row; the loss's kernels on the last op). Timings are kernel "
            "durations, not wall time: gaps in which the GPU waited for the CPU are not in "
            "them. Within one forward op, parameters are ordered as the reverse of their "
            "accumulation; two equal-sized parameters of one op (a norm's weight and bias) "
            "cannot be told apart by the trace.")
    return f"{text} {options.note}" if options.note else text


def comm_record(steps: list[GpuStep], options: Options, path: str | Path) -> CommRecord:
    """The NCCL collectives of the step on every rank given (aligned when several)."""
    alignment: dict[str, Any] = {}
    offsets = {int(g.rank or 0): 0.0 for g in steps}
    if len(steps) > 1:
        offsets, sequence, residual = align_ranks(steps)
        alignment = {
            "reference_rank": min(offsets),
            "clock_offset_s": {str(r): round(v * 1e-6, 9) for r, v in sorted(offsets.items())},
            "max_residual_s": {str(r): round(v * 1e-6, 9) for r, v in sorted(residual.items())},
            "common_sequence": [f"{c}:{n}" for c, n in sequence],
            "method": "median over the common collective sequence of the difference of "
                      "kernel end times from the reference rank's",
        }
    rows = [row for g in steps for row in _collective_rows(g, offsets[int(g.rank or 0)])]
    frame = pd.DataFrame(rows, columns=RECORD_COLUMNS)
    for name in ("bytes", "world_size", "nelems", "iteration", "rank", "launch_order"):
        frame[name] = frame[name].astype("Int64")
    first = steps[0]
    meta: dict[str, Any] = {
        "kind": RECORD_KIND, "importer": IMPORTER,
        "importer_version": IMPORTER_VERSION, "source": _provenance(options, first.label),
        "hardware": options.hardware or first.device or "not recorded in the trace",
        "original_file": Path(str(path)).name, "step": first.step,
        "ranks": sorted(offsets), "model": options.model,
        "columns": {
            "start_s": "kernel start from the rank's ProfilerStep start (rank's clock)",
            "start_after_backward_s": "kernel start from the rank's first backward kernel",
            "duration_s": "NCCL kernel duration (includes waiting for the peers)",
            "bytes": "max(in, out) elements x dtype size (nccl-tests size)",
            "world_size": "the collective's group size (else the trace's world size)",
            "clock_offset_s": "the rank's clock minus the reference rank's",
            "launch_order": "order of the CPU launches within the rank's step",
        },
        "warnings": [w for g in steps for w in g.warnings],
    }
    if alignment:
        meta["alignment"] = alignment
    return CommRecord(frame, meta)


def import_kineto_gpu(path: str | Path, options: Options | None = None) -> KinetoGpuResult:
    """Read a Kineto GPU trace (or a tar of per-rank traces): compute trace of one rank
    (``rank``, default the lowest) plus the comm record of every rank. Nothing is written."""
    options = options or Options()
    docs = read_documents(path)
    steps = [parse_gpu_step(doc, label, options) for label, doc in docs]
    steps.sort(key=lambda g: (g.rank if g.rank is not None else 1 << 30, g.label))
    if options.rank is None:
        chosen = steps[0]
    else:
        match = [g for g in steps if g.rank == options.rank]
        if not match:
            raise InputError(f"no trace of rank {options.rank} (ranks: "
                             f"{[g.rank for g in steps]})", path=path, field="rank")
        chosen = match[0]
    sink = WarningSink(path)
    compute = build_compute(chosen, options, path, sink)
    record = comm_record(steps, options, path)
    return KinetoGpuResult(source_path=str(path), compute=compute, warnings=sink.items,
                           comm_record=record, steps=steps)


__all__ = [
    "RECORD_COLUMNS",
    "RECORD_KIND",
    "Collective",
    "CommRecord",
    "GpuStep",
    "KinetoGpuResult",
    "Options",
    "align_ranks",
    "build_compute",
    "choose_step",
    "comm_record",
    "import_kineto_gpu",
    "parse_gpu_step",
    "read_documents",
    "read_param_table",
]
