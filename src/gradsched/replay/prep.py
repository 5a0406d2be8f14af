"""Arrays derived once from a compute trace and a plan, shared by the engine and the bounds."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain import RangeShares, out_of_range_shares, range_bounds
from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.traces.bundle import ComputeTrace

AR, RS, AG = 0, 1, 2
KIND_NAMES = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass(frozen=True)
class TraceArrays:
    """Per-tensor and per-layer arrays of a compute trace (forward order)."""

    index: dict[str, int]
    ready_s: np.ndarray  # per tensor: time from backward start until its gradient is ready
    nbytes: np.ndarray  # per tensor
    layer_of: np.ndarray  # per tensor: position of its layer in forward order (0..n_layers-1)
    layer_forward_s: np.ndarray  # per layer
    layer_update_s: np.ndarray  # per layer
    ready_pos: np.ndarray  # per tensor: its position in ready order (the trace's ready_order)
    backward_seq_s: np.ndarray  # per ready position: backward compute before that gradient
    forward_s: float
    backward_s: float
    update_s: float
    tensor_update_s: np.ndarray | None = None  # per tensor: its share of the update


def trace_arrays(trace: ComputeTrace) -> TraceArrays:
    """Arrays of ``trace`` (cached on the trace object)."""
    cached = trace._cache.get("arrays")
    if cached is not None:
        return cached
    frame = trace.frame
    order = frame["ready_order"].to_numpy()
    backward = frame["backward_s"].to_numpy(dtype=float)
    cum = np.cumsum(backward[np.argsort(order, kind="stable")])
    ready_s = cum[order]
    _, layer_of = np.unique(frame["layer"].to_numpy(), return_inverse=True)
    n_layers = int(layer_of.max()) + 1
    arrays = TraceArrays(
        index={name: i for i, name in enumerate(frame["name"])},
        ready_s=ready_s,
        nbytes=frame["bytes"].to_numpy(dtype=float),
        layer_of=layer_of,
        layer_forward_s=np.bincount(layer_of, frame["forward_s"].to_numpy(float), n_layers),
        layer_update_s=np.bincount(layer_of, frame["update_s"].to_numpy(float), n_layers),
        ready_pos=order.astype(np.int64),
        backward_seq_s=backward[np.argsort(order, kind="stable")],
        forward_s=float(frame["forward_s"].sum()),
        backward_s=float(backward.sum()),
        update_s=float(frame["update_s"].sum()),
        tensor_update_s=frame["update_s"].to_numpy(dtype=float),
    )
    trace._cache["arrays"] = arrays
    return arrays


@dataclass(frozen=True)
class PlanItems:
    """Every collective one iteration of a plan launches (chunks expanded).

    All-reduce and reduce-scatter items come first, in plan order; the all-gather twin of
    reduce-scatter item i is ``ag_of[i]`` (-1 for other items).
    """

    bucket: np.ndarray  # bucket index per item
    kind: np.ndarray  # AR / RS / AG
    nbytes: np.ndarray
    duration_s: np.ndarray
    latency_s: np.ndarray  # part of the duration that does not share bandwidth
    ready_offset_s: np.ndarray  # eligibility, relative to backward start (AG: see engine)
    key_priority: np.ndarray  # float, smaller first; inf = none
    ag_of: np.ndarray
    member_index: np.ndarray  # tensor index of every bucket member, bucket after bucket
    member_bucket: np.ndarray  # the bucket of each entry of member_index
    bucket_unpack_s: np.ndarray
    bucket_last_pos: np.ndarray  # ready position of each bucket's last gradient
    bucket_release_s: np.ndarray  # earliest launch after backward start (-inf = none)
    n_per_iteration: int


def plan_items(
    arrays: TraceArrays,
    plan: Plan,
    model: CommModel,
    world_size: int,
    pack_s_per_byte: float,
) -> PlanItems:
    """Expand ``plan`` into collective items with durations from ``model`` (vectorised:
    a 1,000-bucket plan expands in well under a millisecond)."""
    buckets = plan.buckets
    n_buckets = len(buckets)
    members = [b.tensors for b in buckets]
    sizes = np.fromiter(map(len, members), dtype=np.int64, count=n_buckets)
    try:  # map and chain: the per-name loop in C (a replay of 45,000 buckets reads them all)
        flat = np.fromiter(map(arrays.index.__getitem__, chain.from_iterable(members)),
                           dtype=np.int64, count=int(sizes.sum()))
    except KeyError as exc:
        raise ConfigError(f"plan '{plan.algorithm}' names tensor {exc.args[0]!r} that the "
                          "trace does not have") from None
    owner = np.repeat(np.arange(n_buckets), sizes)
    total = np.bincount(owner, arrays.nbytes[flat], minlength=n_buckets)
    ready = np.full(n_buckets, -np.inf)
    np.maximum.at(ready, owner, arrays.ready_s[flat])
    first_layer = np.full(n_buckets, np.iinfo(np.int64).max)
    np.minimum.at(first_layer, owner, arrays.layer_of[flat])
    last_pos = np.zeros(n_buckets, dtype=np.int64)
    np.maximum.at(last_pos, owner, arrays.ready_pos[flat])
    pack = np.where(sizes > 1, pack_s_per_byte * total, 0.0)
    release = np.array([b.release_s if b.release_s is not None else -np.inf for b in buckets])
    ready = np.maximum(ready + pack, release)
    has_prio = np.array([b.priority is not None for b in buckets])
    prio = np.array([b.priority if b.priority is not None else np.inf for b in buckets],
                    dtype=float)
    chunks = np.array([b.chunks for b in buckets], dtype=np.int64)
    decoupled = np.array([b.collective == "rs_ag" for b in buckets])
    scattered = decoupled | np.array([b.collective == "reduce_scatter" for b in buckets])

    # First items: all-reduce or reduce-scatter chunks, in plan order (a reduce_scatter
    # bucket has no all-gather twin: its parameters come back through Plan.param_sync).
    first_b = np.repeat(np.arange(n_buckets), chunks)
    first_kind = np.where(scattered[first_b], RS, AR)
    # Then the all-gather twins of reduce-scatter chunks (DeAR gathers in forward order:
    # a bucket's first layer is its priority unless one is set).
    ag_b = first_b[decoupled[first_b]]
    bucket_idx = np.concatenate([first_b, ag_b])
    kind_arr = np.concatenate([first_kind, np.full(len(ag_b), AG)])
    nbytes = total[bucket_idx] / chunks[bucket_idx]
    ready_off = np.concatenate([ready[first_b], np.full(len(ag_b), np.inf)])
    ag_prio = np.where(has_prio[ag_b], prio[ag_b], first_layer[ag_b].astype(float))
    key_priority = np.concatenate([prio[first_b], ag_prio])

    duration = np.zeros(len(bucket_idx))
    latency = np.zeros(len(bucket_idx))
    for k, name in enumerate(KIND_NAMES):
        mask = kind_arr == k
        if mask.any() and world_size > 1:  # one rank communicates nothing
            duration[mask] = model.times(name, nbytes[mask], world_size)
            startup = max(model.startup_s(name, world_size), 0.0)
            latency[mask] = np.minimum(startup, duration[mask])
    if np.any(~np.isfinite(duration)) or np.any(duration < 0):
        raise ConfigError("the cost model returned a negative or non-finite time")
    ag_of = np.full(len(bucket_idx), -1, dtype=np.int64)
    n_first = len(first_b)
    ag_of[np.flatnonzero(decoupled[first_b])] = np.arange(n_first, len(bucket_idx))
    return PlanItems(
        bucket=bucket_idx, kind=kind_arr, nbytes=nbytes, duration_s=duration,
        latency_s=latency, ready_offset_s=ready_off, key_priority=key_priority, ag_of=ag_of,
        member_index=flat, member_bucket=owner, bucket_unpack_s=pack,
        bucket_last_pos=last_pos, bucket_release_s=release, n_per_iteration=len(bucket_idx),
    )


def range_shares(items: PlanItems, model: CommModel, world_size: int) -> RangeShares:
    """Shares of the plan's modelled communication time priced below or above the sizes
    the model measured for each item's collective (:func:`.domain.out_of_range_shares`)."""
    if world_size <= 1 or items.kind.size == 0:
        return RangeShares(0.0, 0.0)
    lo, hi = range_bounds([model.measured_bytes(name, world_size) for name in KIND_NAMES],
                          items.kind)
    return out_of_range_shares(lo, hi, items.nbytes, items.duration_s)


def plan_range_shares(trace: ComputeTrace, plan: Plan, model: CommModel,
                      world_size: int) -> RangeShares:
    """:func:`range_shares` of ``plan`` on ``trace`` (no replay needed: the shares depend
    on the messages and the model alone)."""
    return range_shares(plan_items(trace_arrays(trace), plan, model, world_size, 0.0),
                        model, world_size)
