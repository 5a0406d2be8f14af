"""Discrete-event replay of one plan over several training iterations.

Model (one worker stands for all: data parallelism is symmetric):

* Compute is one serial stream. Each iteration runs the forward pass layer by layer in
  forward order, then the backward pass; gradient ``t`` is ready at
  ``backward_start + ready_s(t)`` (``ready_s`` = cumulative ``backward_s`` in ready order).
* A bucket's collectives become eligible when all its members are ready (plus the pack
  cost ``pack_s_per_byte x bytes`` for multi-tensor buckets, and not before
  ``release_s``). ``chunks`` split a bucket into equal collectives.
* Communication runs on ``channels`` channels (default 1, as one NCCL stream). A free
  channel starts the eligible item with the smallest key (class, priority, eligible
  time, plan position): class 0 = all-reduce and reduce-scatter, class 1 = all-gather
  (which becomes eligible after its reduce-scatter and the end of backward, in forward
  order unless prioritised: DeAR's schedule). With several channels, items in flight
  share bandwidth: an item's start-up (the model's time for one byte) runs at full speed,
  the rest progresses at 1/k of full speed while k items are in their bandwidth phase.
  ``Plan.credit_bytes`` (ByteScheduler's credit, ``bytecore.py`` L238-251): the most urgent
  eligible item starts only while fewer than ``credit_bytes`` bytes are in flight (so the
  item that crosses the credit still starts); with a credit and no ``Plan.channels`` the
  credit alone limits how many run at once.
* All-gather issue (``Plan.ag_issue``): ``eager`` as above. ``lookahead`` is DeAR's
  reference code (lzhangbv/dear_pytorch ``dear/dear_dopt.py``): after backward, ``step()``
  waits for every reduce-scatter, then issues the first group's all-gather (L348-353);
  the forward pre-hook of group g's first module waits for the all-gathers in flight (g's)
  and issues group g+1's (L283-287), then updates the module (L290). Groups are the
  ``rs_ag`` buckets in the order of their first layer; the all-gathers run one at a time
  on their own stream, so the forward of group g overlaps the all-gather of g+1 only.
  Needs ``update="per_layer"``; with ``issue="executor"`` the all-gathers are eager (the
  executor issues them all after backward).
* ``update="global"``: after backward and all communication (plus unpack), the optimizer
  runs for the sum of ``update_s``; then the next forward starts (PyTorch DDP).
  ``update="per_layer"``: the next forward of layer l waits for the communication of
  l's tensors, then runs l's update and forward (ByteScheduler, DeAR).

* Sharded optimizers (``Plan.optimizer``, ``Plan.param_sync``; ``update="global"``
  only). ``sharded``: each rank steps ``1/P`` of the parameters, so the step after all
  communication lasts ``update_s / P`` (an even split: the largest shard is not
  modelled); then the ``param_sync`` collectives (parameter all-gathers or broadcasts)
  run back to back on one stream, and the next forward starts after the last (Megatron-LM's
  distributed optimizer without ``overlap_param_gather``, DeepSpeed ZeRO-1/2, torch's
  ``ZeroRedundancyOptimizer.step``). ``bucket_owner`` is torch's ``hook_with_zero_step``
  (``torch/distributed/algorithms/ddp_comm_hooks/ddp_zero_hook.py``, ``hook_with_zero_fn``):
  at the end of backward (the last bucket's hook), for each bucket k in order, the rank
  ``k mod P`` that owns it (``ZeroRedundancyOptimizer._get_assigned_rank``) waits for
  k's all-reduce and steps k's parameters (their whole ``update_s``), and every rank
  issues k's broadcast from that owner; broadcasts run one at a time, each once its owner
  has stepped; the next forward starts when every rank has stepped its buckets and every
  broadcast has ended (``wait_for_broadcasts``). Collectives are priced by the model
  (``broadcast`` of the bucket's bytes). With ``replicated`` (the default) nothing here
  applies and the arithmetic is the one above.

* Issue order (``issue``): ``dynamic`` (default) is the algorithm as designed: a free
  channel starts the eligible item with the smallest key, whenever it became eligible.
  ``executor`` is what :class:`gradsched.runtime.PlanExecutor` can do on a real process
  group, where every rank must issue the same collectives in the same order: one channel
  and one fixed sequence per iteration (:func:`gradsched.plan.launch_order`, then the
  all-gathers in the order the executor issues them); an item starts only after every
  item before it in the sequence has started, so a late high-priority chunk that the
  sequence puts early holds back the ones after it.

* Interference (optional; all three calibrated by ``gradsched reexec interference``):
  every collective that starts while backward computes costs backward
  ``collective_cpu_s`` of compute time (on CPU: the gloo threads' wake-ups and work take
  the cores from the compute thread); while a collective is in its bandwidth phase,
  backward compute progresses at 1/``compute_slowdown``; while backward computes,
  collectives progress at 1/``comm_slowdown``. Backward and communication are then
  simulated together, event by event.

* Gradient accumulation (``ReplayOptions.grad_accum`` = ``k``, default 1): one replayed
  iteration is one optimizer step of ``k`` micro-batches, as ``DDP.no_sync()`` runs it
  (``torch/nn/parallel/distributed.py``: inside ``no_sync`` ``require_backward_grad_sync``
  is false, so ``_pre_forward`` does not prepare the reducer and the autograd hooks only
  accumulate into ``param.grad``; DeepSpeed's and Megatron's ``gradient_accumulation_steps``
  do the same for data parallelism): ``k - 1`` micro-batches of forward and backward with
  no communication, then one with the plan's communication exactly as at ``k = 1``
  (relative to the start of that last backward), then the update. With
  ``update="per_layer"`` the first micro-batch's forward is the one that waits, layer by
  layer, for the previous step's communication and runs the update; the later forwards
  do not wait. So the step is the ``k = 1`` iteration plus ``(k - 1) x (forward +
  backward)`` of pure compute, for every plan: the exposed communication does not change,
  its share of the step falls about ``k``-fold, and the fastest plan of the DDP family is
  the same at every ``k``. What changes for the published planners: MG-WFBP (Shi et al.)
  and OASR merge buckets so that one iteration's communication overlaps *that
  iteration's* backward; under accumulation it can overlap only the last micro-batch's
  backward (``1/k`` of the step's compute), so their merge decisions stay right but the
  overlap they promise is a ``1/k`` share. WFBP, DDP's and Horovod's buckets likewise
  hide communication under the last backward only. ByteScheduler and DeAR overlap
  communication with the *next* forward (per-layer update); under accumulation only the
  first micro-batch's forward is available, so their "next iteration" is that
  micro-batch. No plan can use the ``k - 1`` communication-free micro-batches: the
  gradients are not final until the last backward. A sharded optimizer's step and
  parameter collectives (``Plan.optimizer``) run once per step, after the last
  micro-batch's communication, as ZeRO-1 under ``no_sync()`` does
  (:mod:`gradsched.planners.zero1_torch`).

The iteration time is the steady-state period between ends of backward (of the last
micro-batch, with accumulation). The replay is a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.limits import (
    MAX_GRAD_ACCUM,
    MAX_REPLAY_ITERATIONS,
    MAX_SECONDS,
    in_range,
    is_grad_accum,
)
from gradsched.plan import AG_ISSUE_MODES, Plan, check_optimizer, launch_order
from gradsched.replay.host import DEFAULT_LAUNCH_QUEUE, HostReplayUnsupported, host_iteration
from gradsched.replay.list_schedule import (
    fifo_one_channel,
    joint_schedule,
    priority_one_channel,
)
from gradsched.replay.lookahead import CommSchedule, bucket_done, lookahead_gathers
from gradsched.replay.prep import (
    AG,
    KIND_NAMES,
    PlanItems,
    TraceArrays,
    plan_items,
    range_shares,
    trace_arrays,
)
from gradsched.traces.bundle import ComputeTrace

ISSUE_MODES = ("dynamic", "executor")
MAX_SLOWDOWN = 1e6
"""Largest interference slowdown accepted (a divisor of compute or collective speed)."""
MAX_CHANNELS = 1024
"""Most concurrent communication channels the replay simulates."""
MAX_TIMELINE_EVENTS = 20_000_000
"""Most events a timeline export may hold (a few GB of Python objects)."""
MAX_PACK_S_PER_BYTE = 1.0
"""Largest pack/unpack cost accepted, seconds per byte."""
MAX_LAUNCH_QUEUE = 1 << 24
"""Largest launch queue accepted (launches)."""
MAX_FORWARD_RATIO = 10.0
"""Largest assumed forward/backward ratio for a trace without measured forward."""


@dataclass(frozen=True)
class ReplayOptions:
    """Knobs of the replay (not of the algorithm)."""

    iterations: int = 5
    channels: int = 1
    pack_s_per_byte: float = 0.0
    compute_slowdown: float = 1.0
    """Backward compute speed divisor while a collective is in its bandwidth phase: the CPU
    interference of ``gradsched reexec interference``, or on a GPU trace the overlap slowdown
    of its generation (:mod:`gradsched.costmodel.overlap_slowdown`, which the replay
    commands' ``--overlap-slowdown auto`` puts here)."""
    comm_slowdown: float = 1.0
    collective_cpu_s: float = 0.0
    issue: str = "dynamic"
    grad_accum: int = 1
    """Micro-batches per optimizer step: ``grad_accum - 1`` without communication, then
    one with the plan's (module docstring)."""
    host: bool = False
    """Replay the host as a resource (:mod:`gradsched.replay.host`); needs a trace with the
    host columns."""
    launch_queue: int = DEFAULT_LAUNCH_QUEUE
    """With ``host``: launches the host may have pending on the device."""
    collective_launch_s: float = 0.0
    """With ``host``: host time to issue one collective at the hook."""

    def __post_init__(self) -> None:
        if not 1 <= self.launch_queue <= MAX_LAUNCH_QUEUE:
            raise ConfigError(f"launch_queue must be in [1, {MAX_LAUNCH_QUEUE}] launches, got "
                              f"{self.launch_queue!r}")
        if not in_range(self.collective_launch_s, 0.0, MAX_SECONDS):
            raise ConfigError(f"collective_launch_s must be a finite number in [0, "
                              f"{MAX_SECONDS:g}] seconds, got {self.collective_launch_s!r}")
        if self.host and (self.interference or self.grad_accum != 1 or self.channels != 1):
            raise ConfigError("the host-aware replay (host) models one communication "
                              "channel, no interference and no gradient accumulation")
        if not is_grad_accum(self.grad_accum):
            raise ConfigError(f"grad_accum must be an integer in [1, {MAX_GRAD_ACCUM}] "
                              f"(micro-batches per optimizer step), got {self.grad_accum!r}")
        if self.issue not in ISSUE_MODES:
            raise ConfigError(f"issue must be one of {ISSUE_MODES}, not {self.issue!r}")
        # Every check is written so that NaN fails it: a NaN slowdown or pack cost made
        # the event loop spin forever (every comparison with NaN is false, so the loop's
        # "work left <= eps" conditions never held: gradsched.replay.list_schedule).
        for name in ("compute_slowdown", "comm_slowdown"):
            if not in_range(getattr(self, name), 1.0, MAX_SLOWDOWN):
                raise ConfigError(f"{name} must be a finite number in [1, {MAX_SLOWDOWN:g}] "
                                  f"(1 = no interference), got {getattr(self, name)!r}")
        if not in_range(self.collective_cpu_s, 0.0, MAX_SECONDS):
            raise ConfigError(f"collective_cpu_s must be a finite number in [0, "
                              f"{MAX_SECONDS:g}] seconds (0 = no interference), got "
                              f"{self.collective_cpu_s!r}")
        if not 2 <= self.iterations <= MAX_REPLAY_ITERATIONS:
            raise ConfigError(f"the replay needs 2 to {MAX_REPLAY_ITERATIONS} iterations "
                              f"(2 reach the steady state), got {self.iterations}")
        if not 1 <= self.channels <= MAX_CHANNELS:
            raise ConfigError(f"channels must be in [1, {MAX_CHANNELS}], got {self.channels}")
        if not in_range(self.pack_s_per_byte, 0.0, MAX_PACK_S_PER_BYTE):
            raise ConfigError(f"pack_s_per_byte must be a finite number in [0, "
                              f"{MAX_PACK_S_PER_BYTE:g}] seconds per byte, got "
                              f"{self.pack_s_per_byte!r}")

    @property
    def interference(self) -> bool:
        """Whether any interference effect is on."""
        return (self.compute_slowdown != 1.0 or self.comm_slowdown != 1.0
                or self.collective_cpu_s > 0)


@dataclass(frozen=True)
class TimelineEvent:
    """One interval on one lane of the timeline (seconds from the start of iteration 0)."""

    iteration: int
    lane: str
    kind: str
    label: str
    start_s: float
    end_s: float
    nbytes: float = 0.0


@dataclass
class ReplayResult:
    """Steady-state outcome of replaying one plan."""

    algorithm: str
    iteration_s: float
    compute_s: float
    exposed_comm_s: float
    n_collectives: int
    n_buckets: int
    comm_busy_s: float
    events: list[TimelineEvent] = field(default_factory=list)
    comm_below_range_pct: float | None = 0.0
    """Share of the modelled communication time priced below the measured sizes (``None``:
    the model does not record what it measured)."""
    comm_above_range_pct: float | None = 0.0
    """Share priced above the largest measured size."""
    world_size_basis: str = "unknown"
    """Whether the model measured the world size (:mod:`gradsched.costmodel.domain`)."""


def replay(
    trace: ComputeTrace,
    plan: Plan,
    model: CommModel,
    world_size: int,
    options: ReplayOptions | None = None,
    timeline: bool = False,
) -> ReplayResult:
    """Replay ``plan`` on ``trace`` with ``model`` for ``world_size`` ranks."""
    options = options or ReplayOptions()
    if world_size < 1:
        raise ConfigError("world_size must be >= 1")
    plan.check_resources()  # bounded collectives per iteration before any array is built
    events = options.iterations * (plan.n_collectives + (1 + 2 * options.grad_accum)
                                   * trace.n_tensors)
    if timeline and events > MAX_TIMELINE_EVENTS:
        raise ConfigError(f"a timeline of {options.iterations} iterations of plan "
                          f"'{plan.algorithm}' holds about {events} events; at most "
                          f"{MAX_TIMELINE_EVENTS} are written (lower --replay-iters)")
    arrays = trace_arrays(trace)
    items = plan_items(arrays, plan, model, world_size, options.pack_s_per_byte)
    check_plan_timing(plan)
    if options.host:
        return _host_result(trace, arrays, plan, items, model, world_size, options, timeline)
    channels = plan.channels or options.channels
    if plan.credit_bytes is not None and plan.channels is None:
        channels = max(items.n_per_iteration, 1)  # the credit alone limits concurrency
    lookahead = (plan.ag_issue == "lookahead" and options.issue == "dynamic"
                 and bool(np.any(items.kind == AG)))
    if lookahead and plan.update != "per_layer":
        raise ConfigError("ag_issue=lookahead issues all-gathers from forward pre-hooks; "
                          f"plan '{plan.algorithm}' needs update=per_layer")
    # Communication of iteration i starts after backward i starts and (every layer's
    # parameters being needed by forward i+1) ends before backward i+1 starts, so its
    # schedule relative to the start of backward is the same in every iteration.
    sequence = None
    if options.issue == "executor":
        sequence, channels = executor_sequence(plan, items), 1
    schedule = comm_schedule(items, arrays, channels, options, sequence, plan.credit_bytes,
                             defer_gathers=lookahead)
    if lookahead:
        schedule = lookahead_gathers(schedule, items, arrays)
    post = post_update(plan, items, schedule, arrays, model, world_size)
    sim = _Iterations(arrays, items, schedule, plan.update == "per_layer", timeline,
                      options.grad_accum, post)
    bwd_ends = [sim.run(i) for i in range(options.iterations)]
    first = 1 if options.iterations >= 3 else 0
    period = (bwd_ends[-1] - bwd_ends[first]) / (options.iterations - 1 - first)
    update = arrays.update_s if post is None else post.step_compute_s
    compute = (arrays.forward_s + arrays.backward_s) * options.grad_accum + update
    shares = range_shares(items, model, world_size)
    return ReplayResult(
        algorithm=plan.algorithm,
        iteration_s=period,
        compute_s=compute,
        exposed_comm_s=max(period - compute, 0.0),
        n_collectives=items.n_per_iteration + (0 if post is None else len(post.sync_s)),
        n_buckets=len(plan.buckets),
        comm_busy_s=float(items.duration_s.sum())
        + (0.0 if post is None else float(sum(post.sync_s))),
        events=sim.events,
        comm_below_range_pct=shares.below_or_none,
        comm_above_range_pct=shares.above_or_none,
        world_size_basis=model.world_size_basis(world_size),
    )


def _host_result(trace: ComputeTrace, arrays: TraceArrays, plan: Plan, items: PlanItems,
                 model: CommModel, world_size: int, options: ReplayOptions, timeline: bool
                 ) -> ReplayResult:
    """:func:`replay` with ``options.host`` (:mod:`gradsched.replay.host`)."""
    if timeline:
        raise ConfigError("the host-aware replay writes no timeline")
    if options.issue != "dynamic" or plan.credit_bytes is not None or (plan.channels or 1) != 1:
        raise HostReplayUnsupported(f"plan '{plan.algorithm}': the host-aware replay issues "
                                    "collectives in hook order on one channel (no credit, "
                                    "issue=dynamic)")
    it = host_iteration(trace, arrays, plan, items, options.launch_queue,
                        options.collective_launch_s)
    compute = arrays.forward_s + arrays.backward_s + arrays.update_s
    shares = range_shares(items, model, world_size)
    return ReplayResult(
        algorithm=plan.algorithm, iteration_s=it.iteration_s, compute_s=compute,
        exposed_comm_s=max(it.comm_end_s - max(it.host_end_s, it.device_end_s), 0.0),
        n_collectives=items.n_per_iteration, n_buckets=len(plan.buckets),
        comm_busy_s=float(items.duration_s.sum()),
        comm_below_range_pct=shares.below_or_none, comm_above_range_pct=shares.above_or_none,
        world_size_basis=model.world_size_basis(world_size),
    )


def check_plan_timing(plan: Plan) -> None:
    """Reject an unknown ``ag_issue`` or a credit that is not a positive byte count (a
    plan built in code skips :meth:`Plan.from_dict`'s checks), and sharded-optimizer
    fields that disagree (:func:`gradsched.plan.check_optimizer`)."""
    check_optimizer(plan)
    if plan.ag_issue not in AG_ISSUE_MODES:
        raise ConfigError(f"plan '{plan.algorithm}': ag_issue must be one of "
                          f"{AG_ISSUE_MODES}, not {plan.ag_issue!r}")
    credit = plan.credit_bytes
    if credit is not None and not (np.isfinite(credit) and credit > 0):
        raise ConfigError(f"plan '{plan.algorithm}': credit_bytes must be a finite number "
                          f"> 0, not {credit!r}")


def executor_sequence(plan: Plan, items: PlanItems) -> np.ndarray:
    """Position of every item in the executor's fixed issue sequence: the all-reduce /
    reduce-scatter chunks in :func:`gradsched.plan.launch_order` (computed from bucket
    bytes, as the executor does from element counts of one dtype), then the all-gathers
    by (key, bucket, chunk), the executor's gather order. (Plain ints and one assignment
    per group: a numpy scalar per item was a tenth of a replay on 45,000 buckets.)"""
    first = np.flatnonzero(items.kind != AG)
    n_b = len(plan.buckets)
    bucket_bytes = np.zeros(n_b)
    np.add.at(bucket_bytes, items.bucket[first], items.nbytes[first])
    bucket = items.bucket.tolist()
    slot: dict[tuple[int, int], int] = {}
    seen = [0] * n_b
    for i in first.tolist():
        b = bucket[i]
        slot[(b, seen[b])] = i  # (bucket, chunk) -> item
        seen[b] += 1
    pos = np.zeros(len(bucket), dtype=np.int64)
    launched = [slot[key] for key in launch_order(plan, [round(x)
                                                         for x in bucket_bytes.tolist()])]
    pos[np.asarray(launched, dtype=np.int64)] = np.arange(len(launched), dtype=np.int64)
    priority = items.key_priority.tolist()
    order = sorted(np.flatnonzero(items.kind == AG).tolist(),
                   key=lambda i: (priority[i], bucket[i], i))
    pos[np.asarray(order, dtype=np.int64)] = len(first) + np.arange(len(order), dtype=np.int64)
    return pos


def comm_schedule(items: PlanItems, arrays: TraceArrays, channels: int,
                  options: ReplayOptions | None = None,
                  sequence: np.ndarray | None = None, credit_bytes: float | None = None,
                  defer_gathers: bool = False) -> CommSchedule:
    """Schedule one iteration's collectives (see the module docstring); ``sequence``: a
    fixed issue order (item -> position), as :func:`executor_sequence`; ``credit_bytes``:
    ByteScheduler's credit; ``defer_gathers``: leave the all-gathers out (their start and
    end stay NaN) for :func:`lookahead_gathers`."""
    options = options or ReplayOptions()
    backward_s = arrays.backward_s
    if defer_gathers:
        items = replace(items, ag_of=np.full_like(items.ag_of, -1))
    credit = credit_bytes if credit_bytes is not None and channels > 1 else None
    fifo = (channels == 1 and not np.any(items.kind == AG)
            and not np.any(np.isfinite(items.key_priority)))
    if options.interference or sequence is not None or credit is not None:
        start, end, backward_s = joint_schedule(items, arrays, channels,
                                                 options.compute_slowdown,
                                                 options.comm_slowdown,
                                                 options.collective_cpu_s, sequence, credit)
    elif fifo:
        start, end = fifo_one_channel(items.ready_offset_s, items.duration_s)
    elif channels == 1:
        start, end = priority_one_channel(items, backward_s)
    else:
        start, end, _ = joint_schedule(items, arrays, channels, 1.0, 1.0)
    if defer_gathers:
        start[items.kind == AG] = np.nan
        end[items.kind == AG] = np.nan
    return CommSchedule(start, end, bucket_done(items, end), backward_s)


@dataclass(frozen=True)
class PostUpdate:
    """What a sharded optimizer does after backward (module docstring, "Sharded
    optimizers"), relative to the start of backward: ``forward_rel_s``, when the next
    forward may start; the step's compute on the busiest rank; each parameter
    collective's duration and start; each rank-step interval (for the timeline)."""

    forward_rel_s: float
    step_compute_s: float
    sync_s: tuple[float, ...]
    sync_start_rel_s: tuple[float, ...]
    sync_kind: tuple[str, ...]
    steps_rel_s: tuple[tuple[float, float], ...]


def post_update(plan: Plan, items: PlanItems, schedule: CommSchedule, arrays: TraceArrays,
                model: CommModel, world_size: int) -> PostUpdate | None:
    """The post-backward phase of a sharded optimizer; ``None`` for ``replicated`` (the
    engine's own global or per-layer update then applies, unchanged)."""
    if plan.optimizer == "replicated":
        return None
    if plan.update != "global":
        raise ConfigError(f"plan '{plan.algorithm}': optimizer={plan.optimizer} needs "
                          "update=global")
    done = schedule.bucket_done_s
    all_done = max(schedule.backward_end_s, float(np.max(done, initial=0.0)))
    if plan.optimizer == "sharded":
        step = arrays.update_s / world_size
        kinds = tuple(s.collective for s in plan.param_sync)
        dur = _sync_times(model, kinds, [s.nbytes for s in plan.param_sync], world_size)
        starts, t = [], all_done + step
        for d in dur:
            starts.append(t)
            t += d
        return PostUpdate(t, step, tuple(dur), tuple(starts), kinds,
                          ((all_done, all_done + step),))
    if plan.optimizer != "bucket_owner":
        raise ConfigError(f"plan '{plan.algorithm}': unknown optimizer {plan.optimizer!r}")
    n_b = len(plan.buckets)
    per_tensor = (arrays.tensor_update_s if arrays.tensor_update_s is not None
                  else np.zeros(len(arrays.ready_s)))
    bucket_update = np.bincount(items.member_bucket, per_tensor[items.member_index], n_b)
    bucket_bytes = np.bincount(items.member_bucket, arrays.nbytes[items.member_index], n_b)
    dur = _sync_times(model, ("broadcast",) * n_b, bucket_bytes.tolist(), world_size)
    owners = min(world_size, max(n_b, 1))
    clock = [schedule.backward_end_s] * owners  # the last bucket's hook: end of backward
    work = [0.0] * owners
    issued, bcast_end = schedule.backward_end_s, schedule.backward_end_s
    starts, steps = [], []
    for k in range(n_b):
        r = k % world_size  # ZeroRedundancyOptimizer._get_assigned_rank
        begin = max(clock[r], float(done[k]))  # allreduce_future.wait()
        clock[r] = begin + float(bucket_update[k])  # _perform_local_step
        work[r] += float(bucket_update[k])
        steps.append((begin, clock[r]))
        issued = max(issued, clock[r])  # every rank has issued k's broadcast
        start = max(issued, bcast_end)
        starts.append(start)
        bcast_end = start + dur[k]
    forward = max(max(clock), bcast_end, all_done)
    return PostUpdate(forward, max(work), tuple(dur), tuple(starts), ("broadcast",) * n_b,
                      tuple(steps))


def _sync_times(model: CommModel, kinds: tuple[str, ...], nbytes: list[float],
                world_size: int) -> list[float]:
    """Seconds of each parameter collective (one rank communicates nothing)."""
    out = []
    for kind, size in zip(kinds, nbytes, strict=True):
        t = 0.0 if world_size <= 1 else model.time(kind, float(size), world_size)
        if not (np.isfinite(t) and t >= 0):
            raise ConfigError("the cost model returned a negative or non-finite time")
        out.append(float(t))
    return out


class _Iterations:
    """The compute clock and when each layer's parameters are up to date, carried from
    one iteration to the next."""

    def __init__(self, arrays: TraceArrays, items: PlanItems, schedule: CommSchedule,
                 per_layer: bool, timeline: bool, grad_accum: int = 1,
                 post: PostUpdate | None = None) -> None:
        self.a = arrays
        self.post = post
        self.grad_accum = grad_accum
        self.items = items
        self.schedule = schedule
        self.per_layer = per_layer
        self.timeline = timeline
        self.events: list[TimelineEvent] = []
        self.clock = 0.0
        self.params_ready = np.zeros(len(arrays.layer_forward_s))
        tensor_done = np.zeros(len(arrays.ready_s))
        tensor_done[items.member_index] = schedule.bucket_done_s[items.member_bucket]
        self.backward_s = schedule.backward_end_s
        self.layer_done_rel = np.full(len(arrays.layer_forward_s), self.backward_s)
        np.maximum.at(self.layer_done_rel, arrays.layer_of, tensor_done)
        self.all_done_rel = max(self.backward_s, float(tensor_done.max(initial=0.0)))

    def run(self, it: int) -> float:
        """Simulate iteration ``it`` (one optimizer step: ``grad_accum`` micro-batches);
        return the time its last backward ends."""
        a = self.a
        for micro in range(self.grad_accum):
            if micro == 0 and self.per_layer:
                self._forward_per_layer(it)
            else:
                self._event(it, "compute", "forward", "forward", self.clock,
                            self.clock + a.forward_s)
                self.clock += a.forward_s
            if micro < self.grad_accum - 1:  # no_sync: no communication, no update
                self._event(it, "compute", "backward", f"backward (micro-batch {micro}, "
                            "no sync)", self.clock, self.clock + a.backward_s)
                self.clock += a.backward_s  # no collective: no interference either
        bwd_start = self.clock
        bwd_end = bwd_start + self.backward_s
        self._event(it, "compute", "backward", "backward", bwd_start, bwd_end)
        if self.timeline:
            self._comm_events(it, bwd_start)
        if self.per_layer:
            self.params_ready = bwd_start + self.layer_done_rel
            self.clock = bwd_end
        elif self.post is not None:
            self._post_events(it, bwd_start)
            self.clock = bwd_start + self.post.forward_rel_s
        else:
            step_start = bwd_start + self.all_done_rel
            self._event(it, "compute", "update", "optimizer step", step_start,
                        step_start + a.update_s)
            self.clock = step_start + a.update_s
        return bwd_end

    def _post_events(self, it: int, bwd_start: float) -> None:
        """Timeline of a sharded optimizer's step(s) and parameter collectives."""
        post = self.post
        if not self.timeline or post is None:
            return
        for begin, end in post.steps_rel_s:
            self._event(it, "compute", "update", "optimizer step (shard)", bwd_start + begin,
                        bwd_start + end)
        for k, (start, d, kind) in enumerate(zip(post.sync_start_rel_s, post.sync_s,
                                                 post.sync_kind, strict=True)):
            self._event(it, "comm", kind, f"param sync {k}", bwd_start + start,
                        bwd_start + start + d)

    def _forward_per_layer(self, it: int) -> None:
        """t_l = max(t_{l-1}, p_l) + w_l, vectorised as W_l + max(t0, max_{j<=l}(p_j - W_{j-1}))."""
        a = self.a
        work = a.layer_update_s + a.layer_forward_s
        cum = np.cumsum(work)
        before = cum - work
        ends = cum + np.maximum(self.clock, np.maximum.accumulate(self.params_ready - before))
        if self.timeline:
            starts = ends - work
            for layer in range(len(work)):
                upd_end = starts[layer] + a.layer_update_s[layer]
                self._event(it, "compute", "update", f"update L{layer}", starts[layer], upd_end)
                self._event(it, "compute", "forward", f"forward L{layer}", upd_end, ends[layer])
        self.clock = float(ends[-1]) if len(ends) else self.clock

    def _comm_events(self, it: int, bwd_start: float) -> None:
        items, sched = self.items, self.schedule
        for i in np.argsort(sched.start_s, kind="stable"):
            self._event(it, "comm", KIND_NAMES[int(items.kind[i])],
                        f"bucket {int(items.bucket[i])}", bwd_start + sched.start_s[i],
                        bwd_start + sched.end_s[i], float(items.nbytes[i]))

    def _event(self, it: int, lane: str, kind: str, label: str, start: float, end: float,
               nbytes: float = 0.0) -> None:
        if self.timeline and end > start:
            self.events.append(TimelineEvent(it, lane, kind, label, float(start), float(end),
                                             nbytes))
