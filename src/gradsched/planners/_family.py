"""Shared helpers of the planners: the ready sequence, contiguous groupings, the WFBP
recurrence and its exact dynamic program.

The *WFBP family* is every plan whose buckets are contiguous runs of tensors in
gradient-ready order, each reduced by one all-reduce on one stream, with the optimizer
running once after all communication (``update="global"``). For that family the replay
reduces to a recurrence over buckets k in ready order (Shi et al., MG-WFBP, Eq. 3-4)::

    start_k  = max(ready_k, finish_{k-1})        ready_k = max ready time of bucket k
    finish_k = start_k + T(bytes_k)
    iteration = forward + max(backward, finish_last) + update

A grouping is stored as ``ends``: the exclusive end index of each group in the ready
sequence (strictly increasing, the last equals the number of tensors).
"""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Collective, Plan, UpdateMode
from gradsched.traces.bundle import ComputeTrace

MB = 1024 * 1024  # bytes, as PyTorch's bucket_cap_mb and Horovod's thresholds count them


@dataclass(frozen=True)
class ReadySeq:
    """Per-tensor arrays in gradient-ready order, plus the compute totals."""

    names: tuple[str, ...]
    nbytes: np.ndarray  # float64 bytes
    numel: np.ndarray
    ready_s: np.ndarray  # time from backward start until ready (non-decreasing)
    layer: np.ndarray  # the trace's layer index (forward order)
    forward_s: float
    backward_s: float
    update_s: float

    @property
    def n(self) -> int:
        return len(self.names)


def ready_seq(trace: ComputeTrace) -> ReadySeq:
    """The ready sequence of ``trace`` (cached on the trace)."""
    cached = trace._cache.get("planner_seq")
    if cached is not None:
        return cached
    seq = trace.ready_sequence()
    out = ReadySeq(
        names=tuple(seq["name"].tolist()),
        nbytes=seq["bytes"].to_numpy(dtype=float),
        numel=seq["numel"].to_numpy(dtype=np.int64),
        ready_s=seq["ready_s"].to_numpy(dtype=float),
        layer=seq["layer"].to_numpy(dtype=np.int64),
        forward_s=trace.forward_total_s,
        backward_s=trace.backward_total_s,
        update_s=trace.update_total_s,
    )
    trace._cache["planner_seq"] = out
    return out


# -- groupings -----------------------------------------------------------------------------
def check_ends(ends: np.ndarray, n: int) -> np.ndarray:
    """Validate a grouping given as exclusive end indices."""
    ends = np.asarray(ends, dtype=np.int64)
    if n == 0:
        return ends[:0]
    if ends.size == 0 or ends[-1] != n or np.any(np.diff(ends) <= 0) or ends[0] <= 0:
        raise ValueError(f"not a grouping of {n} tensors: ends={ends.tolist()}")
    return ends


def ends_from_mask(cuts: Sequence[bool], n: int) -> np.ndarray:
    """``cuts[i]`` true: a group ends after tensor i (i < n-1)."""
    inner = [i + 1 for i, c in enumerate(cuts) if c]
    return np.asarray([*inner, n], dtype=np.int64)


def group_bytes(seq: ReadySeq, ends: np.ndarray) -> np.ndarray:
    prefix = np.concatenate([[0.0], np.cumsum(seq.nbytes)])
    starts = np.concatenate([[0], ends[:-1]])
    return prefix[ends] - prefix[starts]


def group_ready(seq: ReadySeq, ends: np.ndarray) -> np.ndarray:
    """Ready time of each group = max ready time of its members."""
    starts = np.concatenate([[0], ends[:-1]])
    return np.maximum.reduceat(seq.ready_s, starts)


def fill_groups(sizes: np.ndarray, limits: Sequence[float], *, overflow: bool) -> np.ndarray:
    """Fill groups in order. ``limits[k]`` is the cap of group k (the last repeats).

    ``overflow=True`` (PyTorch DDP, DeAR's per-parameter variant): add the tensor, then
    close the group once its size reaches the cap (the crossing tensor stays in it).
    ``overflow=False`` (Horovod): close the group before a tensor that would push it past
    the cap; a tensor larger than the cap travels alone.
    """
    ends: list[int] = []
    total = 0.0
    count = 0
    # Python numbers, not a numpy scalar per tensor: float64 and int64 sums and comparisons
    # give the same values either way; another dtype keeps its own arithmetic
    values = sizes.tolist() if getattr(sizes, "dtype", None) in (np.float64, np.int64) \
        else sizes
    for i, size in enumerate(values):
        cap = limits[min(len(ends), len(limits) - 1)]
        if not overflow and count and total + size > cap:
            ends.append(i)
            total, count = 0.0, 0
        total += float(size)
        count += 1
        cap = limits[min(len(ends), len(limits) - 1)]
        if overflow and total >= cap:
            ends.append(i + 1)
            total, count = 0.0, 0
    if count:
        ends.append(len(sizes))
    return np.asarray(ends, dtype=np.int64)


# -- the recurrence ------------------------------------------------------------------------
def finish_times(ready: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Vectorised ``finish_k = max(ready_k, finish_{k-1}) + d_k`` (finish_{-1} = -inf).

    Unrolled: finish_k = C_k + max_{j<=k} (ready_j - C_{j-1}) with C the prefix sums of d.
    """
    c = np.cumsum(durations)
    c_prev = c - durations
    return c + np.maximum.accumulate(ready - c_prev)


def wfbp_finish_s(seq: ReadySeq, ends: np.ndarray, model: CommModel, world_size: int) -> float:
    """Finish of the last all-reduce (seconds after backward start) of grouping ``ends``."""
    if seq.n == 0:
        return 0.0
    durations = comm_times(model, "all_reduce", group_bytes(seq, ends), world_size)
    return float(finish_times(group_ready(seq, ends), durations)[-1])


def iteration_from_finish(seq: ReadySeq, finish_s: float) -> float:
    """Steady-state iteration time of a WFBP-family plan whose comm ends at ``finish_s``."""
    return seq.forward_s + max(seq.backward_s, finish_s) + seq.update_s


def wfbp_iteration_s(seq: ReadySeq, ends: np.ndarray, model: CommModel,
                     world_size: int) -> float:
    """The replay's iteration time of a WFBP-family grouping, in closed form."""
    return iteration_from_finish(seq, wfbp_finish_s(seq, ends, model, world_size))


# -- the exact dynamic program ---------------------------------------------------------------
def looks_monotone(model: CommModel, world_size: int, seq: ReadySeq, points: int = 2048) -> bool:
    """Whether the all-reduce time is non-decreasing in bytes over the DP's range, checked
    on a dense log grid plus every tensor size (a relative tolerance of 1e-12 absorbs
    rounding)."""
    if seq.n == 0 or world_size <= 1:
        return True
    lo, hi = max(float(seq.nbytes.min()), 1.0), max(float(seq.nbytes.sum()), 2.0)
    grid = np.unique(np.concatenate([np.geomspace(lo, hi, points), seq.nbytes, [hi]]))
    t = comm_times(model, "all_reduce", grid, world_size)
    return bool(np.all(np.diff(t) >= -1e-12 * np.abs(t[1:])) and np.all(t >= 0))


def optimal_ends(seq: ReadySeq, model: CommModel, world_size: int,
                 prune: bool | None = None) -> tuple[np.ndarray, float]:
    """Contiguous grouping minimising the last finish time, and that finish time.

    f(0) = -inf; f(i) = min_{j<i} max(r_i, f(j)) + T(S_i - S_j), with r_i the ready time of
    the i-th ready tensor and S the prefix sums of bytes. Exact for any cost model T,
    because max(r, f) + T is non-decreasing in f (an optimal prefix is never worse than
    another). O(n^2) time in vectorised rows, O(n) memory.

    ``prune`` (default: when :func:`looks_monotone`) uses a bound that holds when T is
    non-decreasing in bytes (then f is non-decreasing too): among the j with
    f(j) <= r_i (communication idle when tensor i is ready) the largest is best, so each
    row scans only j >= that one (:func:`_row_pruned`); this makes compute-bound traces
    close to linear. Both modes return the optimum; ties between equally fast groupings
    may break differently. (A branch and bound over blocks of j was tried and dropped: in
    the communication-bound regime the candidates are nearly flat in j, so it prunes
    nothing.)
    """
    n = seq.n
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    if prune is None:
        prune = looks_monotone(model, world_size, seq)
    prefix = np.concatenate([[0.0], np.cumsum(seq.nbytes)])
    f = np.full(n + 1, -np.inf)
    choice = np.zeros(n + 1, dtype=np.int64)
    floor = priced_floor(model, world_size) if prune else None
    for i in range(1, n + 1):
        ready = float(seq.ready_s[i - 1])
        if not prune:
            f[i], choice[i] = _row_full(i, f, prefix, ready, model, world_size)
        elif floor is not None:
            f[i], choice[i] = _row_floored(i, f, prefix, ready, model, world_size, floor)
        else:
            f[i], choice[i] = _row_pruned(i, f, prefix, ready, model, world_size)
    ends: list[int] = []
    i = n
    while i > 0:
        ends.append(i)
        i = int(choice[i])
    return np.asarray(ends[::-1], dtype=np.int64), float(f[n])


MAX_EXACT_TENSORS = 4096
"""Tensors :func:`optimal_ends` (``O(n^2)``) groups exactly; :func:`bounded_optimal_ends`
puts the bucket boundaries of longer sequences on every ``k``-th tensor instead."""


def bounded_optimal_ends(seq: ReadySeq, model: CommModel, world_size: int
                         ) -> tuple[np.ndarray, float, dict[str, Any]]:
    """:func:`optimal_ends`, exact up to :data:`MAX_EXACT_TENSORS` tensors. Beyond, the
    program runs on runs of ``k = ceil(n / MAX_EXACT_TENSORS)`` consecutive tensors (a run is
    ready when its last tensor is, its bytes their sum), so buckets may end only every
    ``k``-th tensor: the best such grouping, whose finish time is exact for it. The third
    value says so (empty when exact), for the plan's info.

    The answer depends on ``seq``, ``model`` and ``world_size`` alone, and several planners
    ask it of one case (``contiguous_optimum``, ``oasr``, ``search``, ``ddp-list``: four
    times in one ``advise``): it is kept on ``seq`` per model object and world size, and
    asked again it is a copy of the first answer."""
    memo = _optimum_memo(seq)
    setting = (world_size, MAX_EXACT_TENSORS)
    for held_model, held_setting, answer in memo:
        if held_model is model and held_setting == setting:
            ends, finish, bounded = answer
            return ends.copy(), finish, copy.deepcopy(bounded)
    answer = _bounded_optimal_ends(seq, model, world_size)
    memo.append((model, setting, answer))  # holds the model: its id stays unique
    ends, finish, bounded = answer
    return ends.copy(), finish, copy.deepcopy(bounded)


def _optimum_memo(seq: ReadySeq) -> list[tuple[CommModel, tuple[int, int], Any]]:
    """The answers of :func:`bounded_optimal_ends` already found for ``seq``."""
    return _seq_memo(seq).setdefault("optima", [])


def _bounded_optimal_ends(seq: ReadySeq, model: CommModel, world_size: int
                          ) -> tuple[np.ndarray, float, dict[str, Any]]:
    if seq.n <= MAX_EXACT_TENSORS:
        ends, finish = optimal_ends(seq, model, world_size)
        return ends, finish, {}
    step = -(-seq.n // MAX_EXACT_TENSORS)
    run_ends = np.append(np.arange(step, seq.n, step), seq.n)
    starts = np.concatenate([[0], run_ends[:-1]])
    runs = replace(seq, names=tuple(seq.names[e - 1] for e in run_ends),
                   nbytes=np.add.reduceat(seq.nbytes, starts),
                   numel=np.add.reduceat(seq.numel, starts), ready_s=seq.ready_s[run_ends - 1],
                   layer=seq.layer[run_ends - 1])
    ends, finish = optimal_ends(runs, model, world_size)
    return run_ends[ends - 1], finish, {"coarsened": {
        "tensors_per_run": int(step),
        "why": f"{seq.n} tensors exceed the {MAX_EXACT_TENSORS} the exact O(n^2) program "
               "groups: bucket boundaries every run of tensors, the best such grouping"}}


def _row_full(i: int, f: np.ndarray, prefix: np.ndarray, ready: float, model: CommModel,
              world_size: int) -> tuple[float, int]:
    t = comm_times(model, "all_reduce", prefix[i] - prefix[:i], world_size)
    cand = np.maximum(f[:i], ready) + t
    j = int(np.argmin(cand))
    return float(cand[j]), j


def _row_pruned(i: int, f: np.ndarray, prefix: np.ndarray, ready: float, model: CommModel,
                world_size: int) -> tuple[float, int]:
    """The row restricted to j >= j_star (exact when T is non-decreasing).

    f[:i] is then non-decreasing; every j < j_star (the last j with f(j) <= r_i) pays
    r_i + T(S_i - S_j) >= r_i + T(S_i - S_{j_star}), so it cannot beat j_star.
    """
    j_star = int(np.searchsorted(f[:i], ready, side="right")) - 1
    t = comm_times(model, "all_reduce", prefix[i] - prefix[j_star:i], world_size)
    cand = np.maximum(f[j_star:i], ready) + t
    k = int(np.argmin(cand))
    return float(cand[k]), j_star + k


WIDE_ROW = 512
"""Candidates from which a row of the program is first bounded (:func:`_row_floored`): a
narrower row is priced whole, in one model call."""


def priced_floor(model: CommModel, world_size: int) -> tuple[float, float] | None:
    """``(startup, s_per_byte)`` of the wire floor below which :meth:`CommModel.times`
    never prices an all-reduce (it returns ``max(raw, startup + s_per_byte * bytes)``,
    :mod:`gradsched.costmodel.wire`), where it applies; else None."""
    if world_size <= 1 or not model.wire_floor_applies \
            or type(model).times is not CommModel.times:
        return None
    startup, per_byte = model.wire_floor("all_reduce", world_size)
    return (startup, per_byte) if per_byte != 0.0 else None


def _row_floored(i: int, f: np.ndarray, prefix: np.ndarray, ready: float, model: CommModel,
                 world_size: int, floor: tuple[float, float]) -> tuple[float, int]:
    """:func:`_row_pruned`'s answer, pricing only the candidates the wire floor cannot rule
    out. Candidate j costs ``c_j = max(f_j, r_i) + T(m_j)`` with ``T(m) >= s + b m`` as
    :meth:`CommModel.times` computes it, so (rounding being monotone) ``c_j >= l_j =
    max(f_j, r_i) + (s + b m_j)`` in floating point too. The candidate of least ``l_j`` is
    priced first; every j with ``l_j`` above its cost is strictly slower than the optimum,
    so the optimum and its first index are among the rest, which are priced and compared
    as the whole row would be. On 45,000 tensors at 1,024 ranks the floor leaves about a
    fifth of the row's candidates."""
    j_star = int(np.searchsorted(f[:i], ready, side="right")) - 1
    if i - j_star < WIDE_ROW:
        return _row_pruned(i, f, prefix, ready, model, world_size)
    startup, per_byte = floor
    sizes = prefix[i] - prefix[j_star:i]
    base = np.maximum(f[j_star:i], ready)
    bound = base + (startup + per_byte * sizes)
    first = int(np.argmin(bound))
    upper = base[first] + comm_times(model, "all_reduce", sizes[first:first + 1], world_size)[0]
    keep = np.flatnonzero(bound <= upper)
    cand = base[keep] + comm_times(model, "all_reduce", sizes[keep], world_size)
    k = int(np.argmin(cand))
    return float(cand[k]), j_star + int(keep[k])


# -- plans ---------------------------------------------------------------------------------
def plan_from_ends(
    algorithm: str,
    seq: ReadySeq,
    ends: np.ndarray,
    *,
    knobs: dict[str, Any],
    info: dict[str, Any] | None = None,
    collective: Collective = "all_reduce",
    update: UpdateMode = "global",
    releases: Sequence[float] | None = None,
) -> Plan:
    """Buckets = the contiguous groups of ``ends`` in ready order."""
    ends = check_ends(ends, seq.n)
    return Plan(algorithm=algorithm, buckets=_grouped(seq, ends, collective, releases),
                knobs=dict(knobs), update=update, info=dict(info or {}))


def _grouped(seq: ReadySeq, ends: np.ndarray, collective: Collective,
             releases: Sequence[float] | None) -> tuple[Bucket, ...]:
    """The buckets of a grouping, made once per (sequence, grouping, collective, releases):
    the searches plan DDP's caps several times over (``search``, ``best``, ``advise``'s
    sweep), and 45,000 buckets took longer to make than to look up. Buckets are frozen,
    so plans may share them."""
    release = None if releases is None else tuple(float(r) for r in releases)
    key = (ends.tobytes(), collective, release)
    memo = _seq_memo(seq).setdefault("groups", {})
    if key not in memo:
        if len(memo) > _MAX_GROUPINGS:
            memo.clear()
        starts = np.concatenate([[0], ends[:-1]]).tolist()
        memo[key] = tuple(
            Bucket(tensors=seq.names[s:e], collective=collective,
                   release_s=None if release is None else release[k])
            for k, (s, e) in enumerate(zip(starts, ends.tolist(), strict=True)))
    return memo[key]


_MAX_GROUPINGS = 64
"""Groupings :func:`_grouped` keeps per sequence (a search makes a few dozen)."""


_SEQ_MEMOS: dict[int, dict[Any, Any]] = {}


def _seq_memo(seq: ReadySeq) -> dict[Any, Any]:
    """Answers kept for ``seq`` (dropped with it; a trace keeps its ready sequence,
    :func:`ready_seq`)."""
    key = id(seq)
    if key not in _SEQ_MEMOS:
        _SEQ_MEMOS[key] = {}
        weakref.finalize(seq, _SEQ_MEMOS.pop, key, None)
    return _SEQ_MEMOS[key]


def base_info(trace: ComputeTrace, world_size: int) -> dict[str, Any]:
    """What every plan records about its inputs."""
    return {"world_size": int(world_size), "trace": trace.stem, "n_tensors": trace.n_tensors}


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Reject a knob that is not a finite positive number."""
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"knob {name} must be a finite number {bound}, got {value!r}")
    return float(value)


def check_choice(name: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ConfigError(f"knob {name} must be one of {', '.join(choices)}; got {value!r}")
    return value


# -- knobs and scored searches --------------------------------------------------------
@dataclass(frozen=True)
class Knob:
    """One planner knob: its type, default and meaning (``default=None``: derived)."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


Scorer = Callable[[Plan], float]
"""Steady-state iteration time of a candidate plan, in seconds (lower is better)."""


class ScorerFactory(Protocol):
    """Makes the :data:`Scorer` of one case for the planners that search by scoring plans
    (``best``, ``search``, ``dear``, ``bytescheduler``, ``bytescheduler-ps``).

    ``iterations``: replayed iterations per score; ``interference``: ``compute_slowdown``,
    ``comm_slowdown``, ``collective_cpu_s`` and ``issue`` of the replay's options. The
    planners only define this type (dependency inversion): the replay engine lies above
    them, and :class:`gradsched.experiments.scoring.ReplayCache` is the factory that
    :func:`gradsched.experiments.make_plan` supplies.
    """

    def __call__(self, trace: ComputeTrace, model: CommModel, world_size: int,
                 iterations: int = 5, **interference: Any) -> Scorer: ...


def need_scorer(planner: str, scorer: ScorerFactory | None) -> ScorerFactory:
    """``scorer``, or a :class:`~gradsched.errors.ConfigError` saying where one comes from."""
    if scorer is None:
        raise ConfigError(f"planner {planner!r} scores candidate plans by replay: call it "
                          "through gradsched.experiments.make_plan (or pass scorer=)")
    return scorer


def plan_signature(plan: Plan) -> tuple[Any, ...]:
    """Hashable content of a plan's schedule (to skip replaying identical plans)."""
    return (plan.update, plan.channels, plan.ag_issue, plan.credit_bytes,
            bucket_signature(plan.buckets))


def bucket_signature(buckets: Sequence[Bucket]) -> tuple[Any, ...]:
    """Hashable content of a plan's buckets, as the replay reads them (the last part of
    :func:`plan_signature`)."""
    return tuple((b.tensors, b.collective, b.chunks, b.priority, b.release_s)
                 for b in buckets)
