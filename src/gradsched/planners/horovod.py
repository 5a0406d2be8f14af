"""Horovod tensor fusion driven by its background loop, per backend.

Sergeev & Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
arXiv:1802.05799, 2018 (tensor fusion). The loop is read from horovod/horovod at commit
2626dc87a3a8eb8fb7d2216198ce45bce0f9e65a (``horovod/common``); line numbers below are of
that commit.

The background thread (``operations.cc`` ``RunLoopOnce``, L751-851):

* sleeps until ``last_cycle_start + cycle_time`` (L754-760) and sets
  ``last_cycle_start = now`` (L761): a cycle never starts earlier than one cycle time
  after the previous one *started*, and starts at once if the previous one overran;
* takes every tensor enqueued (gradient ready) since the previous cycle
  (``ComputeResponseList`` -> ``PopMessagesFromQueue``, controller.cc L93); in steady
  state the response cache answers without negotiation (``HOROVOD_CACHE_CAPACITY``,
  default 1024, operations.cc L543-551; controller.cc L196-252);
* fuses them in order (``FuseResponses``, controller.cc L901-): a tensor joins the fused
  response while ``tensor_size + new_tensor_size <= TensorFusionThresholdBytes()``
  (L955); a tensor larger than the threshold travels alone;
* runs each fused response with ``PerformOperation`` (operations.cc L832, L277-334).
  With NCCL the all-reduce is enqueued on the GPU stream and handed to a finalizer
  thread (``GPUOpContext::FinalizeGPUQueue``, ops/gpu_operations.cc L59-143, which
  returns ``Status::InProgress()``): the loop goes on at once (**asynchronous**). With
  MPI (``MPIAllreduce::Execute``: ``MPI_Allreduce``, ops/mpi_operations.cc L83) and gloo
  (``gloo::allreduce``, ops/gloo_operations.cc L86) the call returns when the collective
  is done (**blocking**): tensors that become ready meanwhile wait for the next cycle,
  which starts at ``max(cycle start + cycle time, end of the last collective)``, and so
  fuse together.

Defaults: ``HOROVOD_FUSION_THRESHOLD`` 128 MiB and ``HOROVOD_CYCLE_TIME`` 1 ms
(operations.cc L519, L527; ``defaults=post021``); before v0.21 64 MiB / 5 ms
(v0.20.0 operations.cc L432, L440; PR #2468; ``defaults=pre021``).

The planner simulates that loop with the comm model: cycle k starts at ``s_k`` (the
first at the start of backward); the tensors ready by ``s_k`` and not yet taken are fused
in ready order; each bucket gets ``release_s = s_k``; buckets run one at a time on one
stream (``HOROVOD_NUM_NCCL_STREAMS`` default 1, global_state.h L92). Blocking backends:
``s_{k+1} = max(s_k + cycle, end of s_k's last collective)``; NCCL:
``s_{k+1} = s_k + cycle``, and a cycle with nothing ready is skipped to the first
boundary after the next ready time. Global update.

``backend`` (knob) defaults to the case's backend: ``model.meta["backend"]``, which a comm
model loaded from a trace or fitted to traces records when all their series share one
(:func:`gradsched.costmodel.series.backend_meta`); otherwise ``nccl`` (Horovod's GPU
default when built with NCCL, and the previous, cycle-only behaviour). ``rccl`` behaves
as ``nccl``. The plan's ``info`` says where the backend came from.

Remaining differences from Horovod (known):

* The cycle phase: Horovod's loop runs across iterations; here the first cycle starts
  exactly when backward starts, in every iteration.
* The per-cycle coordination is free: with the cache, ``CoordinateCacheAndState``
  (controller.cc L159) still runs a small bit-vector all-reduce every cycle on the
  controller (MPI or gloo), and a tensor ready on one rank but not yet on all waits for
  the next cycle; the first (uncached) iteration negotiates through rank 0.
* Fusion order is the ready order; Horovod fuses cache hits in cache-bit order (the
  order responses were first cached, i.e. the first iteration's ready order).
* The loop's own CPU work (memcpy into the fusion buffer, scaling, NCCL enqueue) takes
  no time; the replay's interference options (``comm_slowdown``) are not applied inside
  the planner's simulation, so with them the replay's collectives can end later than the
  releases assumed; autotuning (``HOROVOD_AUTOTUNE``), hierarchical all-reduce, several
  NCCL streams, grouped all-reduce and Adasum are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.planners._family import (
    MB,
    Knob,
    ReadySeq,
    base_info,
    check_choice,
    check_positive,
    fill_groups,
    plan_from_ends,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "horovod"
SUMMARY = ("Horovod tensor fusion per background cycle; blocking cycles with MPI/gloo, "
           "asynchronous with NCCL (Sergeev & Del Balso 2018)")
DEFAULTS = {"pre021": (64.0, 5.0), "post021": (128.0, 1.0)}  # (threshold MiB, cycle ms)
BLOCKING = {"mpi": True, "gloo": True, "nccl": False, "rccl": False}
DEFAULT_BACKEND = "nccl"
KNOBS: tuple[Knob, ...] = (
    Knob("defaults", str, "post021", "pre021: 64 MiB / 5 ms (Horovod < 0.21); "
         "post021: 128 MiB / 1 ms", tuple(DEFAULTS)),
    Knob("fusion_threshold_mb", float, None, "fusion buffer in MiB (default: from defaults)"),
    Knob("cycle_time_ms", float, None, "background cycle in ms (default: from defaults)"),
    Knob("backend", str, None, "collective backend: mpi/gloo block the loop, nccl/rccl do "
         "not (default: the comm model's backend, else nccl)", tuple(BLOCKING)),
)
_TOL = 1e-9  # relative to the cycle: a tensor ready exactly on a boundary is in that cycle


@dataclass(frozen=True)
class LoopResult:
    """The simulated loop: bucket ends (ready sequence), release times, cycles that ran."""

    ends: list[int]
    releases: list[float]
    cycles: int
    finish_s: float


def case_backend(model: CommModel) -> tuple[str | None, str]:
    """(backend, where it came from) of the comm model; (None, reason) if unknown."""
    meta = getattr(model, "meta", None)
    if not isinstance(meta, dict):
        return None, f"the {type(model).__name__} model records no backend"
    origin = meta.get("source") or ", ".join(meta.get("fitted_from") or [])
    if meta.get("backend"):
        return str(meta["backend"]), f"comm model metadata ({origin or 'no source named'})"
    if meta.get("backends"):
        return None, f"comm model {origin} has backends {', '.join(meta['backends'])}"
    return None, "the comm model records no backend"


def resolve_backend(knob: str | None, model: CommModel) -> tuple[str, str]:
    """The backend the loop runs with, and where it came from."""
    if knob is not None:
        return knob, "knob"
    found, source = case_backend(model)
    if found is None:
        return DEFAULT_BACKEND, f"default ({source})"
    if found not in BLOCKING:
        raise ConfigError(f"horovod: the case's backend {found!r} ({source}) is not one of "
                          f"{', '.join(BLOCKING)}; set --knob horovod.backend=...")
    return found, source


def simulate_loop(seq: ReadySeq, model: CommModel, world_size: int, threshold_bytes: float,
                  cycle_s: float, blocking: bool) -> LoopResult:
    """Horovod's background loop over one backward (see the module docstring)."""
    ends: list[int] = []
    releases: list[float] = []
    base, k = 0.0, 0  # cycle k starts at base + k * cycle (base moves when a cycle overran)
    taken, cycles, stream_free = 0, 0, 0.0
    while taken < seq.n:
        start = base + k * cycle_s
        if seq.ready_s[taken] > start + _TOL * cycle_s:  # nothing new: skip idle cycles
            k += max(1, int(np.ceil(np.round((seq.ready_s[taken] - start) / cycle_s, 9))))
            continue
        last = int(np.searchsorted(seq.ready_s, start + _TOL * cycle_s, side="right"))
        sub = fill_groups(seq.nbytes[taken:last], [threshold_bytes], overflow=False)
        durations = comm_times(model, "all_reduce", np.diff(np.concatenate(
            [[0.0], np.cumsum(seq.nbytes[taken:last])[sub - 1]])), world_size)
        for d in durations:
            stream_free = max(stream_free, start) + float(d)
        ends.extend((sub + taken).tolist())
        releases.extend([start] * len(sub))
        taken, cycles = last, cycles + 1
        if blocking and stream_free > start + cycle_s:
            base, k = stream_free, 0
        else:
            k += 1
    return LoopResult(ends=ends, releases=releases, cycles=cycles, finish_s=stream_free)


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         defaults: str = "post021", fusion_threshold_mb: float | None = None,
         cycle_time_ms: float | None = None, backend: str | None = None) -> Plan:
    """Fuse per background cycle; release at the cycle start (blocking per backend)."""
    check_choice("defaults", defaults, tuple(DEFAULTS))
    threshold = DEFAULTS[defaults][0] if fusion_threshold_mb is None else fusion_threshold_mb
    cycle_ms = DEFAULTS[defaults][1] if cycle_time_ms is None else cycle_time_ms
    check_positive("fusion_threshold_mb", threshold)
    check_positive("cycle_time_ms", cycle_ms)
    if backend is not None:
        check_choice("backend", backend, tuple(BLOCKING))
    used, source = resolve_backend(backend, model)
    seq = ready_seq(trace)
    loop = simulate_loop(seq, model, world_size, threshold * MB, cycle_ms * 1e-3,
                         BLOCKING[used])
    knobs: dict[str, Any] = {"defaults": defaults, "fusion_threshold_mb": threshold,
                             "cycle_time_ms": cycle_ms, "backend": used}
    info = base_info(trace, world_size) | {
        "cycles_used": loop.cycles, "backend_from": source, "blocking": BLOCKING[used],
        "loop_finish_s": loop.finish_s}
    return plan_from_ends(NAME, seq, np.asarray(loop.ends, dtype=np.int64), knobs=knobs,
                          info=info, releases=loop.releases)
