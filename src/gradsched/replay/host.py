"""The host as a resource: one iteration as a launching thread and the device stream.

Used by :func:`gradsched.replay.engine.replay` with ``ReplayOptions(host=True)`` on a trace
with the host columns (``host_forward_s``, ``host_backward_s``; ``forward_launches``,
``backward_launches`` where present), e.g. from ``gradsched import kineto --host``.

Model (one rank stands for all, as in the engine):

* The host thread issues, in order, each layer's forward (its ``host_forward_s``), then each
  gradient's backward in ready order (``host_backward_s``; autograd's device thread, which
  the forward thread waits for). Item ``i``'s device work (``forward_s`` of the layer,
  ``backward_s`` of the gradient) starts at ``max(issue_i, device_end_{i-1})``, ``issue_i``
  being the end of its host time: one stream, in order.
* Bounded launch queue: the host may run ahead of the device by at most ``launch_queue``
  launches (GPU activities not yet finished). Item ``i`` is issued no earlier than the
  device end of every item before the earliest ``m`` whose launches ``m..i`` fit in the
  queue. Default 1024: the H200 profiler traces of ``data/h200/kineto-steps`` show the host's
  launch calls blocking once about 1020 launches are pending (the importer's sidecar
  ``host.launch_queue_pending_at_waits``: 1019-1021 in the four traces that block). Without
  launch columns every item counts as one launch.
* Collectives: DDP's communication hook runs on the autograd thread when a bucket's last
  gradient is accumulated, so right after the host item of that gradient the host spends
  ``collective_launch_s`` per collective (chunks count; 0 by default: no committed trace
  measured it), and the collective is eligible at ``max(that issue, the gradient's device
  end + pack, release)``. Collectives run one at a time in issue order on one
  communication stream (NCCL's), concurrent with compute.
* The iteration starts with host and device in step (a loop that reads its loss, or CUDA-
  event timing, synchronizes every iteration) and ends when the host has issued everything,
  the device has computed everything and the last collective has ended; then the
  optimizer's ``update_s`` runs on the device (its host time is not in the traces). Every
  iteration is the same, so the period is one iteration.

Only all-reduce and reduce-scatter buckets with ``update="global"`` and the replicated
optimizer (PyTorch DDP's and the planners of its family) are modelled; other plans are
refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.replay.prep import AG, PlanItems, TraceArrays
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.columns import HOST_COLUMNS

DEFAULT_LAUNCH_QUEUE = 1024
"""Launches the host may have pending on the device (module docstring)."""


@dataclass(frozen=True)
class HostIteration:
    """One iteration of the host-aware replay (seconds from its start)."""

    iteration_s: float
    forward_end_s: float
    """When the forward is done on both host and device (a CUDA event after the loss)."""
    host_s: float
    """The host's busy time (its items and collective launches)."""
    host_end_s: float
    device_end_s: float
    comm_end_s: float
    device_wait_s: float
    """How long the device stood idle waiting for the host (its end less its work)."""


class HostReplayUnsupported(ConfigError):
    """A plan the host-aware replay cannot run: it models DDP's family (global update,
    replicated optimizer, no all-gathers) issuing collectives in hook order on one channel
    without a credit (module docstring)."""


def has_host_columns(trace: ComputeTrace) -> bool:
    """Whether the trace has the host columns."""
    return all(c in trace.frame.columns for c in HOST_COLUMNS)


def host_iteration(trace: ComputeTrace, arrays: TraceArrays, plan: Plan, items: PlanItems,
                   launch_queue: int = DEFAULT_LAUNCH_QUEUE,
                   collective_launch_s: float = 0.0) -> HostIteration:
    """One iteration of ``plan`` on ``trace`` with the host as a resource (module
    docstring); ``items`` priced as the engine prices them."""
    if not has_host_columns(trace):
        raise ConfigError(f"trace '{trace.stem}' has no host columns ({', '.join(HOST_COLUMNS)})"
                          ": the host-aware replay needs them (gradsched import kineto --host)")
    if plan.update != "global" or plan.optimizer != "replicated" or np.any(items.kind == AG):
        raise HostReplayUnsupported(f"plan '{plan.algorithm}': the host-aware replay models DDP's "
                                    "family only (update=global, replicated optimizer, no "
                                    "all-gathers)")
    frame = trace.frame
    order = np.argsort(arrays.ready_pos, kind="stable")
    n_layers = len(arrays.layer_forward_s)

    def per(col: str, default: float) -> np.ndarray:
        values = (frame[col].to_numpy(dtype=float) if col in frame.columns
                  else np.full(len(frame), default))
        return values

    host_f = np.bincount(arrays.layer_of, per("host_forward_s", 0.0), n_layers)
    launch_f = np.bincount(arrays.layer_of, per("forward_launches", 1.0), n_layers)
    host_b = per("host_backward_s", 0.0)[order]
    launch_b = per("backward_launches", 1.0)[order]
    host = np.concatenate([host_f, host_b])
    device = np.concatenate([arrays.layer_forward_s, arrays.backward_seq_s])
    cum = np.concatenate([[0.0], np.cumsum(np.concatenate([launch_f, launch_b]))])
    dev_end = np.zeros(len(host))
    # each bucket's collectives are issued after the host item of its last gradient
    at_pos: dict[int, list[int]] = {}
    for j in np.flatnonzero(items.kind != AG):
        at_pos.setdefault(int(items.bucket_last_pos[items.bucket[j]]), []).append(int(j))
    host_t = dev_t = comm_t = forward_end = bwd_start = 0.0
    host_busy = float(host.sum())
    first = 0  # earliest item that may still be in the launch queue
    for k in range(len(host)):
        while first < k and cum[k + 1] - cum[first] > launch_queue:
            first += 1
        host_t += host[k]
        if first > 0:
            host_t = max(host_t, dev_end[first - 1])  # the queue is full until it ends
        if k == n_layers:
            bwd_start = max(host_t, dev_t)
        dev_t = max(host_t, dev_t) + device[k]
        dev_end[k] = dev_t
        if k == n_layers - 1:
            forward_end = max(host_t, dev_t)
        for j in at_pos.get(k - n_layers, ()) if k >= n_layers else ():
            host_t += collective_launch_s
            host_busy += collective_launch_s
            b = items.bucket[j]
            ready = max(host_t, dev_t + items.bucket_unpack_s[b],
                        bwd_start + items.bucket_release_s[b])
            comm_t = max(comm_t, ready) + items.duration_s[j]
    compute_only = float(device.sum())
    return HostIteration(iteration_s=max(host_t, dev_t, comm_t) + arrays.update_s,
                         forward_end_s=forward_end, host_s=host_busy, host_end_s=host_t,
                         device_end_s=dev_t, comm_end_s=comm_t,
                         device_wait_s=max(dev_t - compute_only, 0.0))
