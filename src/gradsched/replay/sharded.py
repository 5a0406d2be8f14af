"""Replay of one sharded-data-parallel iteration (FSDP2 / ZeRO-3) of a
:class:`~gradsched.plan_sharded.ShardedPlan`, with its memory peak.

The model (per rank, ``P`` ranks, steady state):

* **Forward.** The root's all-gather is issued first. At unit ``k``'s pre-forward (when
  the compute reaches its first layer) the host issues unit ``k``'s all-gather if no
  prefetch did, then those of units ``k+1..k+d_f`` (``forward_prefetch``), and the unit's
  compute waits for its own all-gather (FSDP2 ``FSDPParamGroup.pre_forward`` ->
  ``wait_for_unshard``). A unit with ``reshard_after_forward`` frees its gathered
  parameters after its forward.
* **Backward.** Layers in reverse forward order. At unit ``k``'s pre-backward the host
  issues its backward all-gather (resharded units only) unless prefetched, then those of
  units ``k-1..k-d_b`` (``backward_prefetch``); after its last layer's backward it issues
  the reduce-scatter of its gradients (``post_backward`` -> ``foreach_reduce``). The root's
  gradients are reduce-scattered after the whole backward
  (``_root_post_backward_final_callback``).
* **Update.** The optimizer steps on the shards once every reduce-scatter is done: the
  trace's update time divided by ``P``.
* **Communication.** One channel, collectives in issue order (FSDP2 issues all-gathers and
  reduce-scatters on one process group by default; NCCL runs one communicator's
  collectives in order). Times from the comm model (``all_gather`` /
  ``reduce_scatter`` of the unit's full bytes).
* **Semantics.** ``streams`` (GPU: collectives run on their own streams and the host goes
  on; the host is modelled as issuing when the compute stream reaches the hook, i.e.
  without run-ahead) or ``blocking`` (FSDP2 on CPU/gloo: ``foreach_all_gather`` and
  ``foreach_reduce`` call the collectives with ``async_op=False``, so the host, which
  also computes, waits for each one).

**Gradient accumulation** (``grad_accum`` = ``k`` micro-batches per optimizer step, default
1). The first ``k - 1`` micro-batches run with FSDP2's ``set_requires_gradient_sync(False)``
(torch 2.14, ``torch/distributed/fsdp/_fully_shard/_fully_shard.py`` L413-435: it sets
``reduce_grads = False`` on every parameter group), the last with sync on. Every
micro-batch all-gathers as the plan says, forward and backward: ``pre_forward`` and
``pre_backward`` call ``unshard`` whatever ``reduce_grads`` is
(``_fsdp_param_group.py`` L550-605), and ``post_backward`` with ``reduce_grads`` false
accumulates the unsharded gradient, reshards (``reshard_after_backward``, default true,
L224) and returns before any reduce-scatter (L607-632: ``if not self.reduce_grads: ...
self.reshard() ... to_accumulated_grad_if_needed() ... return``); so the next
micro-batch's forward all-gathers every unit again, resharded after forward or not. Only
the last micro-batch reduce-scatters (``foreach_reduce`` below L632); the root's
``_root_post_backward_final_callback`` (``_fsdp_state.py`` L401-440) only runs the groups'
``post_backward`` and finalises, with the same early return. So per step, ``k`` forward
all-gathers per unit (``2k`` with resharding after forward), ``k`` of the root, one
reduce-scatter each. The plan's ``reshard_after_forward`` therefore costs ``k`` extra
all-gathers per unit per step instead of one, which moves the optimum towards not
resharding as ``k`` grows.
**Parameters kept unsharded between micro-batches** (the plan's
``keep_unsharded_between_microbatches``): FSDP2's ``set_reshard_after_backward(False)``
(``_fully_shard.py`` L490-511: ``reshard_after_backward`` of every parameter group) on the
``k - 1`` silent micro-batches, true again for the last. ``post_backward`` then does not
reshard (``_fsdp_param_group.py`` L627-629), so the next micro-batch's ``pre_forward``
finds every unit and the root gathered and ``unshard`` returns at once
(``if self.is_unsharded: return``, L385-386): no forward all-gather after the first
micro-batch. A unit resharded after forward is still freed by its ``post_forward``
(``reshard``, L509-511 and L579) and all-gathered again in every backward. So per step:
one forward all-gather per unit and the root, ``k`` backward ones per resharded unit, one
reduce-scatter each (with no unit resharded after forward, ZeRO-2-like: one all-gather per
unit per step). Memory: no gathered parameters are freed after the ``k - 1`` silent
backwards, only after the last one's; a resharded unit's are still freed between its
forward and its backward all-gather.
**Memory under accumulation:** the unsharded gradients are kept across micro-batches
(``accumulate_unsharded_grad_if_needed`` / ``to_accumulated_grad_if_needed``): each
unit's from the start of its backward in the first micro-batch until its reduce-scatter
in the last ends, the root's likewise. The published sharded planners' defaults assume
one micro-batch per step: FSDP2's ``reshard_after_forward=True`` trades one extra
all-gather per step for memory, which under accumulation is ``k`` extra all-gathers;
ZeRO-3's and the saturation cap's unit sizes assume the reduce-scatters of every step
overlap backward, which holds for the last micro-batch only.

**Overlap slowdown** (``compute_slowdown`` = ``s``, default 1): compute, forward and
backward, progresses at ``1/s`` of its speed while a collective is on the channel (a GPU's
NCCL kernels hold SMs and memory bandwidth beside it:
:mod:`gradsched.costmodel.overlap_slowdown`). Exact: the channel's busy intervals are known
when a run of layers starts (collectives are issued only at hooks, between runs, and the
channel's times do not depend on the compute), so a run's end is where its work, integrated
at speed 1 outside the busy intervals and ``1/s`` inside, reaches its nominal seconds.
``compute_s`` then counts the compute as it ran (stretched); with ``s = 1`` nothing changes,
bit for bit (the same additions). Blocking semantics: the host waits for every collective,
so no compute overlaps one and ``s`` has no effect.

**Memory.** Per rank, over the iteration: the gathered (unsharded) parameters of each unit
from its all-gather's issue until it is freed (after forward if resharded, after its
backward otherwise; a backward all-gather until the end of the unit's backward), plus the
unsharded gradients of each unit from the start of its backward until its reduce-scatter
ends (the root's from the start of backward). ``gathered_peak_bytes`` is the maximum of
their sum (a free and an allocation at the same instant: the free first);
``resident_bytes`` the parameter and gradient shards (``2 x bytes / P``). Activations and
optimizer state are not in the trace and not counted.

**Mixed precision** (a plan's ``mixed_precision``, FSDP2's ``MixedPrecisionPolicy`` and
torchao's float8 all-gather): all-gathers move and gather the parameter dtype's bytes,
reduce-scatters the reduce dtype's, the unsharded gradients hold the larger of the two
(:mod:`gradsched.replay.sharded_dtypes`); without one, every collective moves the trace's
bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Literal

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.costmodel.domain import (
    IN_RANGE,
    RangeShares,
    out_of_range_shares,
    range_bounds,
)
from gradsched.errors import ConfigError
from gradsched.limits import MAX_GRAD_ACCUM, is_grad_accum
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded_dtypes import dtyped_layout, layer_bytes
from gradsched.replay.sharded_layout import ROOT, UnitLayout, unit_layout
from gradsched.replay.sharded_mesh_times import MeshTimes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq, layer_seq

MAX_COMPUTE_SLOWDOWN = 1e6
"""Largest compute slowdown accepted (the DDP replay's bound, ``engine.MAX_SLOWDOWN``)."""

Semantics = Literal["streams", "blocking"]
SEMANTICS = ("streams", "blocking")


@dataclass(frozen=True)
class ShardedReplay:
    """One replayed iteration (seconds, bytes)."""

    iteration_s: float
    forward_end_s: float
    backward_end_s: float
    compute_s: float
    comm_busy_s: float
    gathered_peak_bytes: float
    resident_bytes: float
    n_collectives: int

    @property
    def exposed_comm_s(self) -> float:
        """Iteration time not spent computing."""
        return self.iteration_s - self.compute_s

    def to_dict(self) -> dict[str, float | int]:
        return {"iteration_s": self.iteration_s, "forward_end_s": self.forward_end_s,
                "backward_end_s": self.backward_end_s, "compute_s": self.compute_s,
                "exposed_comm_s": self.exposed_comm_s, "comm_busy_s": self.comm_busy_s,
                "gathered_peak_bytes": self.gathered_peak_bytes,
                "resident_bytes": self.resident_bytes, "n_collectives": self.n_collectives}


_WHEN = itemgetter(0, 1)
"""A memory event's (time, 0 free / 1 alloc): the order :meth:`_Run.peak` reads them in."""


class _Run:
    """The state of one replay: host/compute time, the channel, memory events."""

    def __init__(self, blocking: bool, compute_slowdown: float = 1.0) -> None:
        self.blocking = blocking
        self.slowdown = compute_slowdown
        self.busy_intervals: list[tuple[float, float]] = []  # channel, in issue order
        self.next_busy = 0  # first interval that may end after self.t
        self.stretch = 0.0  # compute seconds added by the slowdown
        self.t = 0.0
        self.channel_free = 0.0
        self.busy = 0.0
        self.count = 0
        self.memory: list[tuple[float, int, float]] = []  # (time, 0 free / 1 alloc, bytes)
        self.side_free = 0.0  # HSDP's all-reduce stream (gradsched.replay.sharded_mesh)

    def side(self, ready: float, duration: float) -> float:
        """A collective on the second channel (HSDP's all-reduce stream), started once
        ``ready`` and the channel's previous one end; returns its end."""
        start = max(ready, self.side_free, self.t if self.blocking else ready)
        self.side_free = start + duration
        self.busy += duration
        self.count += 1
        if self.blocking:
            self.t = self.side_free
        return self.side_free

    def issue(self, duration: float, nbytes: float) -> float:
        """Issue a collective now; returns its end. Blocking: the host waits for it."""
        start = max(self.t, self.channel_free)
        end = start + duration
        self.channel_free = end
        self.busy += duration
        self.count += 1
        if self.slowdown != 1.0 and end > start:
            self.busy_intervals.append((start, end))
        if self.blocking:
            self.t = end
        return end

    def compute(self, start: float, work: float) -> float:
        """Run ``work`` seconds of compute from ``start`` (>= every earlier start); returns
        its end, at speed ``1/slowdown`` while the channel is busy (module docstring)."""
        if self.slowdown == 1.0:
            return start + work
        spans = self.busy_intervals
        while self.next_busy < len(spans) and spans[self.next_busy][1] <= start:
            self.next_busy += 1
        t, left = start, work
        for i in range(self.next_busy, len(spans)):
            lo, hi = spans[i]
            if t < lo:  # free until this collective starts
                if left <= lo - t:
                    break
                left -= lo - t
                t = lo
            if left * self.slowdown <= hi - t:  # ends while this collective runs
                end = t + left * self.slowdown
                self.stretch += end - start - work
                return end
            left -= (hi - t) / self.slowdown
            t = hi
        if t == start:  # no collective beside it: the same addition as without slowdown
            return start + work
        end = t + left
        self.stretch += end - start - work
        return end

    def alloc(self, at: float, nbytes: float) -> None:
        if nbytes > 0:
            self.memory.append((at, 1, nbytes))

    def free(self, at: float, nbytes: float) -> None:
        if nbytes > 0:
            self.memory.append((at, 0, -nbytes))

    def peak(self) -> float:
        level = best = 0.0
        for _, _, delta in sorted(self.memory, key=_WHEN):
            level += delta
            best = max(best, level)
        return best


def check_grad_accum(grad_accum: int) -> int:
    """``grad_accum`` if it is a number of micro-batches per step, else ``ConfigError``."""
    if not is_grad_accum(grad_accum):
        raise ConfigError(f"grad_accum must be an integer in [1, {MAX_GRAD_ACCUM}] "
                          f"(micro-batches per optimizer step), got {grad_accum!r}")
    return grad_accum


def check_compute_slowdown(compute_slowdown: float) -> float:
    """``compute_slowdown`` if it is a finite number >= 1, else ``ConfigError``."""
    if not (isinstance(compute_slowdown, int | float) and math.isfinite(compute_slowdown)
            and 1.0 <= compute_slowdown <= MAX_COMPUTE_SLOWDOWN):
        raise ConfigError(f"compute_slowdown must be a finite number in [1, "
                          f"{MAX_COMPUTE_SLOWDOWN:g}] (1 = no overlap slowdown), got "
                          f"{compute_slowdown!r}")
    return float(compute_slowdown)


@dataclass(frozen=True)
class StepOptions:
    """How one optimizer step is replayed (module docstring), checked once when built:
    ``blocking`` semantics (the host waits for every collective) or streams; ``grad_accum``
    micro-batches per step, only the last reduce-scattering; ``keep_unsharded``: the
    parameters stay gathered from one micro-batch's backward to the next one's forward;
    ``compute_slowdown``: compute speed divisor while a collective is on the channel;
    ``reduce_every``: every micro-batch reduce-scatters and none keeps its unsharded
    gradients (FSDP2's default sync, :mod:`.sharded_accum`)."""

    blocking: bool = False
    grad_accum: int = 1
    keep_unsharded: bool = False
    compute_slowdown: float = 1.0
    reduce_every: bool = False

    def __post_init__(self) -> None:
        check_grad_accum(self.grad_accum)
        check_compute_slowdown(self.compute_slowdown)


@dataclass(frozen=True)
class _Micro:
    """One micro-batch of a step: what its forward and backward do (module docstring,
    gradient accumulation)."""

    options: StepOptions
    index: int

    @property
    def last(self) -> bool:
        return self.index == self.options.grad_accum - 1

    @property
    def kept(self) -> bool:
        """Every unit and the root still gathered from the previous backward."""
        return self.options.keep_unsharded and self.index > 0

    @property
    def reduce(self) -> bool:
        """It reduce-scatters (gradient sync on)."""
        return self.last or self.options.reduce_every

    @property
    def grads_held(self) -> bool:
        """An earlier micro-batch allocated the unsharded gradients already."""
        return self.index > 0 and not self.options.reduce_every

    @property
    def reshard(self) -> bool:
        """The gathered parameters are freed after backward (``reshard_after_backward``)."""
        return self.last or not self.options.keep_unsharded


@dataclass(frozen=True)
class _Step:
    """What every pass of a step reads: the runs of layers (:func:`_runs`), the layout,
    the all-gather and reduce-scatter times per unit (the root's last) and HSDP's mesh
    times (:mod:`gradsched.replay.sharded_mesh`; None without)."""

    runs: list[tuple[int, float, float]]
    layout: UnitLayout
    ag: np.ndarray
    rs: np.ndarray
    mesh: MeshTimes | None


def replay_sharded(trace: ComputeTrace, plan: ShardedPlan, model: CommModel, world_size: int,
                   *, semantics: Semantics = "streams", grad_accum: int = 1,
                   compute_slowdown: float = 1.0, reduce_every: bool = False) -> ShardedReplay:
    """Replay ``plan`` for ``trace`` on ``world_size`` ranks, one optimizer step of
    ``grad_accum`` micro-batches, compute at ``1/compute_slowdown`` while a collective is on
    the channel (see the module docstring)."""
    if semantics not in SEMANTICS:
        raise ConfigError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    options = StepOptions(blocking=semantics == "blocking", grad_accum=grad_accum,
                          keep_unsharded=plan.keep_unsharded_between_microbatches,
                          compute_slowdown=compute_slowdown, reduce_every=reduce_every)
    if (plan.mesh is not None and plan.mesh.is_hsdp) or any(
            not isinstance(u.reshard_after_forward, bool) for u in plan.units):
        raise ConfigError(f"sharded plan '{plan.algorithm}' has an HSDP mesh or an integer "
                          "reshard_after_forward: replay it on a two-level cluster "
                          "(gradsched.replay.sharded_mesh: shard mesh, advise --sharded --mesh)")
    seq = layer_seq(trace)
    layout = plan_layout(trace, plan, seq)
    gather, reduce = layout.sizes()
    return replay_layout(seq, layout, (plan.forward_prefetch, plan.backward_prefetch),
                         comm_times(model, "all_gather", gather, world_size),
                         comm_times(model, "reduce_scatter", reduce, world_size), world_size,
                         options)


def plan_layout(trace: ComputeTrace, plan: ShardedPlan, seq: LayerSeq) -> UnitLayout:
    """The plan's checked layout, its bytes those of its mixed-precision policy when it has
    one (:mod:`gradsched.replay.sharded_dtypes`)."""
    layout = unit_layout(plan, seq, trace.path)
    if plan.mixed_precision is None:
        return layout
    return dtyped_layout(layout, layer_bytes(trace, seq, plan.mixed_precision))


def replay_layout(seq: LayerSeq, layout: UnitLayout, prefetch: tuple[int, int],
                  ag: np.ndarray, rs: np.ndarray, world: int, options: StepOptions,
                  mesh: MeshTimes | None = None) -> ShardedReplay:
    """The replay of a checked layout with its all-gather and reduce-scatter times given
    (``ag[k]``, ``rs[k]`` per unit, the root's last), for searches that replay many plans;
    ``prefetch``: the (forward, backward) prefetch depths; ``options``: the step's
    micro-batches, semantics and slowdown (:class:`StepOptions`); ``mesh``: HSDP's
    all-reduces and integer resharding (:mod:`gradsched.replay.sharded_mesh`; with
    ``all_reduce_last``, only the last micro-batch all-reduces)."""
    grad_accum = options.grad_accum
    run = _Run(options.blocking, options.compute_slowdown)
    step = _Step(_runs_of(seq, layout), layout, ag, rs, mesh)
    early = step if mesh is None else replace(step, mesh=mesh.before_last())
    depth_f, depth_b = prefetch
    for index in range(grad_accum):
        micro = _Micro(options, index)
        this = step if index == grad_accum - 1 else early
        root_ready = _forward(this, depth_f, run, micro)
        forward_end = run.t
        rs_end = _backward(this, depth_b, run, root_ready, micro)
        backward_end = run.t
    update_s, forward_s, backward_s, nbytes = _sums_of(seq)
    run.t = max(run.t, rs_end) + float(update_s) / max(world, 1)
    compute = float((forward_s + backward_s) * grad_accum + update_s / world)
    if run.stretch:
        compute += run.stretch
    total = float(nbytes)
    return ShardedReplay(iteration_s=run.t, forward_end_s=forward_end,
                         backward_end_s=backward_end, compute_s=compute,
                         comm_busy_s=run.busy, gathered_peak_bytes=run.peak(),
                         resident_bytes=2.0 * math.ceil(total / max(world, 1)),
                         n_collectives=run.count)


_LAST_RUNS: list[tuple[LayerSeq, np.ndarray, list[tuple[int, float, float]]]] = []
"""The last (layers, owner array, runs) :func:`_runs_of` read: a search replays one layout
under several settings in a row (the same owner array; the runs are only read)."""


_LAST_SUMS: list[tuple[LayerSeq, tuple[np.float64, ...]]] = []
"""The last layers :func:`_sums_of` summed (a search replays one model many times)."""


def _sums_of(seq: LayerSeq) -> tuple[np.float64, ...]:
    """The layers' update, forward and backward seconds and bytes, each summed (numpy's
    sums, kept as they are), once for the last layers met."""
    if not _LAST_SUMS or _LAST_SUMS[0][0] is not seq:
        _LAST_SUMS[:] = [(seq, (seq.update_s.sum(), seq.forward_s.sum(), seq.backward_s.sum(),
                                seq.nbytes.sum()))]
    return _LAST_SUMS[0][1]


def _runs_of(seq: LayerSeq, layout: UnitLayout) -> list[tuple[int, float, float]]:
    """:func:`_runs`, read once for the last layers and owner array met."""
    if _LAST_RUNS and _LAST_RUNS[0][0] is seq and _LAST_RUNS[0][1] is layout.owner:
        return _LAST_RUNS[0][2]
    runs = _runs(seq, layout)
    _LAST_RUNS[:] = [(seq, layout.owner, runs)]
    return runs


def _runs(seq: LayerSeq, layout: UnitLayout) -> list[tuple[int, float, float]]:
    """Maximal runs of consecutive layers with one owner, forward order: (owner, forward
    seconds, backward seconds). A unit is one run (its layers are contiguous); between
    them the root's layers form runs of their own. Nothing inside a run waits for a
    collective, so the replay steps from run to run."""
    runs: list[tuple[int, float, float]] = []
    start = 0
    for j in range(1, seq.n + 1):
        if j == seq.n or layout.owner[j] != layout.owner[start]:
            runs.append((int(layout.owner[start]), float(seq.forward_s[start:j].sum()),
                         float(seq.backward_s[start:j].sum())))
            start = j
    return runs


def _forward(step: _Step, depth: int, run: _Run, micro: _Micro) -> float:
    """Forward pass; returns when the root's all-gather ended (``-inf`` without a root or
    when ``micro.kept``: every unit and the root still gathered from the previous backward,
    so nothing is all-gathered)."""
    runs, layout, ag, mesh, kept = step.runs, step.layout, step.ag, step.mesh, micro.kept
    n_units = len(layout.ranges)
    # end of each unit's forward all-gather (NaN: not issued yet)
    gathered = np.full(n_units, -math.inf if kept else np.nan)
    root_ready = -math.inf
    if layout.root_bytes > 0 and not kept:
        run.alloc(run.t, layout.root_bytes)
        root_ready = run.issue(ag[-1], layout.root_bytes)
    for k, forward_s, _ in runs:
        wait = root_ready
        if k != ROOT:
            for target in range(k, min(k + depth, n_units - 1) + 1):
                if np.isnan(gathered[target]):
                    run.alloc(run.t, layout.unit_bytes[target])
                    gathered[target] = run.issue(ag[target], layout.unit_bytes[target])
            wait = gathered[k]
        run.t = run.compute(max(run.t, wait), forward_s)
        if k != ROOT and layout.reshard[k]:
            run.free(run.t, layout.unit_bytes[k])
            if mesh is not None:  # reshard_after_forward=int keeps a slice until backward
                run.alloc(run.t, mesh.post_forward_bytes[k])
    return root_ready


def _backward(step: _Step, depth: int, run: _Run, root_ready: float, micro: _Micro) -> float:
    """Backward pass; returns when the last reduce-scatter ends. ``micro.reduce`` false: a
    micro-batch with gradient sync off (no reduce-scatter, the unsharded gradients kept);
    ``micro.grads_held``: an earlier micro-batch allocated them already; ``micro.reshard``
    false: the gathered parameters are kept after backward (``reshard_after_backward``
    off)."""
    runs, layout, ag, rs, mesh = step.runs, step.layout, step.ag, step.rs, step.mesh
    reduce, grads_held, reshard = micro.reduce, micro.grads_held, micro.reshard
    n_units = len(layout.ranges)
    gathered = np.full(n_units, -math.inf)  # backward all-gather ends (-inf: not needed)
    issued = [not r for r in layout.reshard]
    last_rs = run.t
    ag_back = ag if mesh is None else mesh.backward_all_gather_s
    hsdp = mesh is not None and mesh.all_reduce_s.size > 0
    if not grads_held:
        run.alloc(run.t, layout.grad(ROOT))  # root gradients, from the start of backward
    for k, _, backward_s in reversed(runs):
        wait = root_ready
        if k != ROOT:
            if not grads_held:
                run.alloc(run.t, layout.grad(k))  # this unit's unsharded gradients
            for target in range(k, max(k - depth, 0) - 1, -1):
                if not issued[target]:
                    issued[target] = True
                    run.alloc(run.t, layout.unit_bytes[target])
                    gathered[target] = run.issue(ag_back[target],
                                                 layout.unit_bytes[target])
                    if mesh is not None:
                        run.free(gathered[target], mesh.post_forward_bytes[target])
            wait = gathered[k]
        run.t = run.compute(max(run.t, wait), backward_s)
        if k != ROOT:
            if reshard:
                run.free(run.t, layout.unit_bytes[k])  # gathered parameters, after backward
            if reduce:
                last_rs = run.issue(rs[k], layout.unit_bytes[k])
                run.free(last_rs, layout.grad(k))  # gradients, once reduce-scattered
                if hsdp:  # then the all-reduce of the shard among replicas
                    last_rs = run.side(last_rs, mesh.all_reduce_s[k])  # type: ignore[union-attr]
    if layout.root_bytes > 0:
        if reshard:
            run.free(run.t, layout.root_bytes)  # the root's gathered parameters
        if reduce:
            last_rs = run.issue(rs[-1], layout.root_bytes)
            run.free(last_rs, layout.grad(ROOT))
            if hsdp:
                last_rs = run.side(last_rs, mesh.all_reduce_s[-1])  # type: ignore[union-attr]
    return max(last_rs, run.channel_free)


def sharded_range_shares(trace: ComputeTrace, plan: ShardedPlan, model: CommModel,
                         world_size: int) -> RangeShares:
    """Share of the plan's modelled all-gather and reduce-scatter time (one of each per unit
    and the root) priced outside the sizes ``model`` measured
    (:func:`gradsched.costmodel.domain.out_of_range_shares`)."""
    if world_size <= 1:
        return IN_RANGE
    gather, reduce = plan_layout(trace, plan, layer_seq(trace)).sizes()
    collectives = ("all_gather", "reduce_scatter")
    lo, hi = range_bounds([model.measured_bytes(c, world_size) for c in collectives],
                          np.repeat([0, 1], gather.size))
    seconds = np.concatenate([comm_times(model, c, sizes, world_size)
                              for c, sizes in zip(collectives, (gather, reduce), strict=True)])
    return out_of_range_shares(lo, hi, np.concatenate([gather, reduce]), seconds)
