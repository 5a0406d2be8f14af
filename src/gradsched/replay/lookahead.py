"""DeAR's all-gather issue after backward (``Plan.ag_issue = "lookahead"``), on the schedule
of one iteration's collectives that :func:`gradsched.replay.engine.comm_schedule` returns:
the :class:`CommSchedule` of every item and the completion of every bucket. The rule is
the reference code's (lzhangbv/dear_pytorch ``dear/dear_dopt.py`` L283-290, L348-353), as
the engine's module docstring states it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.replay.prep import AG, RS, PlanItems, TraceArrays


@dataclass(frozen=True)
class CommSchedule:
    """Start and end of every item, and each bucket's completion, relative to the start
    of backward."""

    start_s: np.ndarray
    end_s: np.ndarray
    bucket_done_s: np.ndarray
    backward_end_s: float


def bucket_done(items: PlanItems, end: np.ndarray) -> np.ndarray:
    """A bucket is complete when its last collective is (plus its unpack)."""
    done = np.zeros(len(items.bucket_unpack_s))
    np.fmax.at(done, items.bucket, end)  # fmax: a deferred all-gather (NaN) does not count
    return done + items.bucket_unpack_s


def gather_groups(items: PlanItems, arrays: TraceArrays) -> tuple[list[int], np.ndarray]:
    """The ``rs_ag`` buckets in DeAR's gather order (first layer, then bucket index) and
    each bucket's first layer (forward order; -1 for buckets without all-gathers)."""
    n_b = len(items.bucket_unpack_s)
    first = np.full(n_b, np.iinfo(np.int64).max)
    np.minimum.at(first, items.member_bucket, arrays.layer_of[items.member_index])
    gathered = np.unique(items.bucket[items.kind == AG])
    order = sorted(gathered.tolist(), key=lambda b: (int(first[b]), b))
    first_layer = np.full(n_b, -1, dtype=np.int64)
    first_layer[gathered] = first[gathered]
    return order, first_layer


def positions_by_value(values: np.ndarray, n: int) -> list[np.ndarray]:
    """For each ``v`` in ``0..n-1``, the positions of ``values`` that hold it, ascending
    (one stable sort instead of ``n`` scans)."""
    order = np.argsort(values, kind="stable")
    bounds = np.searchsorted(values[order], np.arange(n + 1), side="left")
    return [order[bounds[v]:bounds[v + 1]] for v in range(n)]


def layer_buckets(layer_of: np.ndarray, bucket_of: np.ndarray, n_layers: int,
                  n_buckets: int) -> list[list[int]]:
    """For each layer ``0..n_layers-1``, the distinct buckets its members are in, ascending
    (one sort of the (layer, bucket) pairs)."""
    pairs = np.unique(layer_of.astype(np.int64) * n_buckets + bucket_of)
    layers, buckets = pairs // n_buckets, (pairs % n_buckets).tolist()
    bounds = np.searchsorted(layers, np.arange(n_layers + 1), side="left").tolist()
    return [buckets[bounds[v]:bounds[v + 1]] for v in range(n_layers)]


def lookahead_gathers(schedule: CommSchedule, items: PlanItems,
                      arrays: TraceArrays) -> CommSchedule:
    """Fill in the all-gathers of a ``defer_gathers`` schedule as DeAR's reference code
    issues them (module docstring: group 0's once backward and every reduce-scatter are
    done; group k+1's in the forward pre-hook of group k's first layer, once group k's has
    finished), simulating the next forward (per-layer update then forward, from the end
    of backward, as :class:`_Iterations` does) alongside. Chunks of one bucket run back to
    back. Every layer of group k+1 comes at or after group k's first layer (groups are in
    first-layer order), so each all-gather is issued before a layer waits for it."""
    order, first_layer = gather_groups(items, arrays)
    start, end = schedule.start_s.copy(), schedule.end_s.copy()
    all_gathers = np.flatnonzero(items.kind == AG)
    of_bucket = positions_by_value(items.bucket[all_gathers], len(items.bucket_unpack_s))
    gathers = [all_gathers[of_bucket[b]] for b in order]
    rs_end = float(np.max(end[items.kind == RS], initial=0.0))
    # Parameters not behind a deferred all-gather are ready as the schedule says; a
    # gathered bucket's entry is set when its all-gather is issued.
    # Python lists in the per-layer loop below: a numpy reduction per layer costs more than
    # the handful of buckets a layer has (the maximum picks a value, so it is the same)
    done = bucket_done(items, np.where(items.kind != AG, end, -np.inf)).tolist()
    buckets_of = layer_buckets(arrays.layer_of[items.member_index], items.member_bucket,
                               len(arrays.layer_forward_s), len(items.bucket_unpack_s))
    work = (arrays.layer_update_s + arrays.layer_forward_s).tolist()

    def issue(k: int, at: float) -> float:
        t = at
        for i in gathers[k]:
            start[i], t = t, t + float(items.duration_s[i])
            end[i] = t
        done[order[k]] = t + float(items.bucket_unpack_s[order[k]])
        return t

    ag_end = [0.0] * len(order)
    if order:
        ag_end[0] = issue(0, max(schedule.backward_end_s, rs_end))
    clock, k = schedule.backward_end_s, 0
    for layer, w in enumerate(work):
        while k < len(order) and first_layer[order[k]] == layer:
            hook = max(clock, ag_end[k])  # all_gather_comm.synchronize()
            if k + 1 < len(order):
                ag_end[k + 1] = issue(k + 1, hook)
            k += 1
        ready = max([schedule.backward_end_s] + [done[b] for b in buckets_of[layer]])
        clock = max(clock, ready) + w
    return CommSchedule(start, end, bucket_done(items, end), schedule.backward_end_s)
