"""One point's step time from the FLOPs model and the FSDP2 replay, and the calibration of
the FLOPs model's utilisation on one point.

**Compute.** :func:`gradsched.traces.flops.flops_trace` of the point's shape, micro-batch
and sequence on its GPU type (forward ``2 x tokens x parameters`` per matrix plus causal
attention, backward twice the forward) at model-FLOPs utilisation ``mfu``. Full activation
checkpointing re-runs each block's forward inside its backward (Chen et al. 2016,
"Training Deep Nets with Sublinear Memory Cost", Section 4; PyTorch's
``torch.utils.checkpoint``): backward = 2 + 1 forwards, so each tensor's ``backward_s``
gains its ``forward_s``. Selective checkpointing (recomputing a few cheap operations) and
"not stated" are priced without recomputation; the calibrated ``mfu`` absorbs what that
misses at the calibration point.

**Replay.** FSDP2's default layout (``fully_shard`` per decoder block, the rest in the root,
``reshard_after_forward=True``, one unit prefetched: planner ``fsdp2`` of
:mod:`gradsched.planners.sharded`, as ``gradsched shard compare`` replays it; for a point
published with ``SHARD_GRAD_OP``, the same units kept gathered from forward to backward,
planner ``fsdp2-noreshard``) on the
point's GPU count, ``grad_accum`` micro-batches per step
(:func:`gradsched.replay.sharded.replay_layout`, streams semantics), collectives priced by
the settings' comm model of the point's GPU type. Both hooks of
:mod:`gradsched.experiments.at_scale.hooks` run on every replay.

**As the published runs were configured** (:data:`~.points.REDUCE_DTYPES`,
:data:`~.points.GRAD_SYNCS`): the reduce-scatters carry ``reduce_dtype`` elements (a
float32 reduction moves twice the bf16 trace's bytes; the all-gathers stay in the
parameters' bf16), and a run that reduce-scatters after ``every_micro_batch`` (Composer's
FSDP1) runs ``grad_accum`` identical synchronised micro-batches, each with its forward and
backward all-gathers and its reduce-scatter, then one optimizer step: its step is
``k x (replay of one micro-batch - update) + update``. ``last_micro_batch`` is FSDP2's
accumulation with sync off, as the sharded replay models it. The domain shares
(:func:`gradsched.replay.sharded.sharded_range_shares`) are those of the plan's bf16 unit
sizes; a float32 reduce-scatter is twice as large, so its share above the measured sizes
can only be larger than the row says.

**Calibration.** The replayed step falls as ``mfu`` rises (compute scales as ``1/mfu``;
communication does not change), so the ``mfu`` whose replayed step equals the published
one is unique; :func:`calibrate_mfu` finds it by safeguarded fixed-point iteration
(``mfu <- mfu x replayed / published``, exact when no communication is exposed) inside a
bisection bracket, to a relative step error of :data:`CALIBRATION_RTOL`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times, load_comm_spec
from gradsched.costmodel.domain import RangeShares
from gradsched.errors import InputError
from gradsched.experiments.at_scale.hooks import compute_slowdown, straggler_transform
from gradsched.experiments.at_scale.points import REDUCE_DTYPES, Point
from gradsched.experiments.at_scale.settings import AtScaleSettings
from gradsched.experiments.at_scale.sync import SyncSlack, sync_slack, unit_compute_s, unit_slack
from gradsched.io import read_bytes
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import (
    ShardedReplay,
    StepOptions,
    check_compute_slowdown,
    replay_layout,
    sharded_range_shares,
)
from gradsched.replay.sharded_layout import unit_layout
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.flops import FlopsSetting, flops_trace
from gradsched.traces.layers import LayerSeq, layer_seq

PLANNERS = {"full_shard": "fsdp2", "shard_grad_op": "fsdp2-noreshard"}
"""The FSDP2 layout of each sharding strategy (:data:`~.points.SHARDINGS`)."""
CALIBRATION_RTOL = 1e-9
MFU_LOW = 1e-3
MAX_STEPS = 200


@lru_cache(maxsize=1024)
def base_trace(point: Point) -> ComputeTrace:
    """The point's compute trace at 100 % utilisation, recomputation included (module
    docstring). A function of ``point`` alone, kept for the process: the calibration, the
    rows and every variant of a ``gradsched batch`` job share it (callers derive new traces
    from it, :func:`at_mfu`, and never change it)."""
    setting = FlopsSetting(micro_batch=point.micro_batch, seq_len=point.seq_len,
                           gpu=point.gpu, mfu=1.0, dtype="bf16")
    trace = flops_trace(point.shape, setting)
    if point.activation_checkpointing != "full":
        return trace
    frame = trace.frame.assign(backward_s=trace.frame["backward_s"] + trace.frame["forward_s"])
    return ComputeTrace(frame=frame, meta={**trace.meta, "activation_checkpointing": "full"})


def at_mfu(base: ComputeTrace, mfu: float) -> ComputeTrace:
    """``base`` (at 100 %) priced at utilisation ``mfu``."""
    frame = base.frame.assign(forward_s=base.frame["forward_s"] / mfu,
                              backward_s=base.frame["backward_s"] / mfu)
    return _same_layers(ComputeTrace(frame=frame, meta={**base.meta, "mfu": mfu},
                                     path=base.path), base)


def _same_layers(trace: ComputeTrace, like: ComputeTrace) -> ComputeTrace:
    """``trace`` with its :func:`~gradsched.traces.layers.layer_seq` cached from that of
    ``like``, a trace of the same tensors and layers (its times scaled): each layer's
    tensors and block are taken from ``like`` (the part that costs a pass over every
    tensor's name), the per-layer sums computed from ``trace`` as ``layer_seq`` computes
    them (``traces/layers.py``, ``_layer_seq``). Left alone if the tensors or layers
    differ."""
    if trace is like or "sharded_layers" in trace._cache:
        return trace
    frame, other = trace.frame, like.frame
    layers = frame["layer"].to_numpy()
    names = frame["name"].to_numpy()
    if "at_scale_layers" not in like._cache:  # the base's layers, once
        layers0 = other["layer"].to_numpy()
        like._cache["at_scale_layers"] = (layers0, other["name"].to_numpy(),
                                          *np.unique(layers0, return_inverse=True))
    layers0, names0, keys, layer_of = like._cache["at_scale_layers"]
    if not ((layers is layers0 or np.array_equal(layers, layers0))
            and (names is names0 or np.array_equal(names, names0))):
        return trace
    seq = layer_seq(like)

    def per_layer(column: str) -> np.ndarray:
        return np.bincount(layer_of, frame[column].to_numpy(dtype=float), keys.size)

    trace._cache["sharded_layers"] = LayerSeq(
        tensors=seq.tensors, nbytes=per_layer("bytes"), forward_s=per_layer("forward_s"),
        backward_s=per_layer("backward_s"), update_s=per_layer("update_s"), block=seq.block)
    return trace


_MODELS: dict[tuple[str, bytes], CommModel] = {}


def comm_model(spec: str) -> CommModel:
    """:func:`~gradsched.costmodel.base.load_comm_spec` of ``spec``, one model per spec and
    file content for the process: the variants of a ``gradsched batch`` job that price with
    the same file share its model and what it has memoised (its wire floor)."""
    path = Path(spec)
    content = read_bytes(path) if not spec.startswith("alpha-beta:") and path.is_file() \
        else b""
    key = (spec, content)
    if key not in _MODELS:
        _MODELS[key] = load_comm_spec(spec)
    return _MODELS[key]


def _times(model: CommModel, collective: str, nbytes: np.ndarray, gpus: int) -> np.ndarray:
    """:func:`~gradsched.costmodel.base.comm_times`, memoised on the model per collective,
    sizes and world size (a calibration replays the same unit sizes at every utilisation it
    tries); a copy, so callers may scale it."""
    nbytes = np.asarray(nbytes, dtype=float)
    memo = model.__dict__.setdefault("_at_scale_times", {})
    key = (collective, nbytes.tobytes(), int(gpus))
    if key not in memo:
        memo[key] = comm_times(model, collective, nbytes, gpus)
    return memo[key].copy()


@dataclass(frozen=True)
class StepReplay:
    """A replayed step and what it was priced with."""

    replay: ShardedReplay
    shares: RangeShares
    basis: str
    sync: SyncSlack | None = None
    largest_unit_bytes: float = 0.0


def replay_step(trace: ComputeTrace, point: Point, model: CommModel,
                settings: AtScaleSettings, comm_scale: float = 1.0) -> StepReplay:
    """One optimizer step of ``point`` replayed with FSDP2's default layout (module
    docstring), the hooks applied. ``comm_scale`` multiplies every collective's time (1:
    the model's; the decomposition of :mod:`~.decompose` asks what factor the published
    step would need)."""
    trace = _same_layers(straggler_transform(trace, point, settings), trace)
    slowdown = check_compute_slowdown(compute_slowdown(trace, point, settings))
    plan = make_sharded_plan(PLANNERS[point.sharding], trace, model, point.gpus)
    seq = layer_seq(trace)
    layout = unit_layout(plan, seq, trace.path)
    sizes = np.append(layout.unit_bytes, layout.root_bytes)
    reduce_scale = REDUCE_DTYPES[point.reduce_dtype] / REDUCE_DTYPES["bf16"]
    every = point.grad_sync == "every_micro_batch"
    ag = comm_scale * _times(model, "all_gather", sizes, point.gpus)
    rs = comm_scale * _times(model, "reduce_scatter", sizes * reduce_scale, point.gpus)
    replay = replay_layout(seq, layout, (plan.forward_prefetch, plan.backward_prefetch),
                           ag, rs, point.gpus, StepOptions(
                               blocking=False, grad_accum=1 if every else point.grad_accum,
                               keep_unsharded=plan.keep_unsharded_between_microbatches,
                               compute_slowdown=slowdown))
    if every and point.grad_accum > 1:
        replay = repeat_micro_batches(replay, point.grad_accum,
                                      float(seq.update_s.sum()) / point.gpus)
    sync = None
    if point.gpus > 1 and layout.ranges:
        units = len(layout.ranges)
        fwd, bwd = unit_compute_s(seq, layout)
        shares = unit_slack(fwd, bwd, np.asarray(ag[:units]), np.asarray(rs[:units]),
                            regather=np.asarray(layout.reshard[:units], dtype=bool))
        sync = sync_slack(shares, np.concatenate([fwd, bwd]), replay.n_collectives,
                          point.gpus)
        if settings.unit_jitter is not None:
            wait = point.grad_accum * sync.wait_s(settings.unit_jitter.cv)
            replay = replace(replay, iteration_s=replay.iteration_s + wait)
    return StepReplay(replay, sharded_range_shares(trace, plan, model, point.gpus),
                      model.world_size_basis(point.gpus), sync,
                      float(np.max(sizes)) if len(sizes) else 0.0)


def repeat_micro_batches(one: ShardedReplay, k: int, update_s: float) -> ShardedReplay:
    """A step of ``k`` synchronised micro-batches from the replay ``one`` of a single one
    (module docstring): every time but the update ``k`` times, the collectives ``k``
    times, the memory peak unchanged."""
    return replace(one, iteration_s=k * (one.iteration_s - update_s) + update_s,
                   forward_end_s=(k - 1) * (one.iteration_s - update_s) + one.forward_end_s,
                   backward_end_s=(k - 1) * (one.iteration_s - update_s) + one.backward_end_s,
                   compute_s=k * (one.compute_s - update_s) + update_s,
                   comm_busy_s=k * one.comm_busy_s, n_collectives=k * one.n_collectives)


def predicted_step_s(base: ComputeTrace, mfu: float, point: Point, model: CommModel,
                     settings: AtScaleSettings) -> StepReplay:
    """The replayed step of ``point`` with its compute at utilisation ``mfu``."""
    return replay_step(at_mfu(base, mfu), point, model, settings)


def calibrate_mfu(point: Point, model: CommModel, settings: AtScaleSettings) -> float:
    """The utilisation at which the replayed step of ``point`` equals its published step
    (module docstring). Uses ``point`` and nothing else."""
    base = base_trace(point)
    target = point.published_step_s

    def step(mfu: float) -> float:
        return predicted_step_s(base, mfu, point, model, settings).replay.iteration_s

    lo, hi = MFU_LOW, 1.0
    if step(hi) > target * (1 + CALIBRATION_RTOL):
        raise InputError(f"the replay at 100 % utilisation ({step(hi):.4g} s) is slower than "
                         f"the published step ({target:.4g} s): the comm model cannot have "
                         "produced it", path=point.path, row=point.row, field="step_s")
    if step(lo) < target:
        raise InputError(f"the published step ({target:.4g} s) needs a utilisation below "
                         f"{MFU_LOW:.0%}", path=point.path, row=point.row, field="step_s")
    mfu = min(1.0, step(1.0) / target)  # exact when no communication is exposed
    for _ in range(MAX_STEPS):
        got = step(mfu)
        if abs(got / target - 1) <= CALIBRATION_RTOL:
            return mfu
        if got > target:
            lo = mfu
        else:
            hi = mfu
        guess = mfu * got / target
        mfu = guess if lo < guess < hi else 0.5 * (lo + hi)
    return mfu
