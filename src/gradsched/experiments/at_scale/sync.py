"""Where the ranks of an FSDP step meet, and whether waiting for the slowest rank at each of
those meetings can cost more than the per-step straggler model charges.

**Synchronisation points.** Every collective of an FSDP step is one: an NCCL all-gather or
reduce-scatter cannot finish on any rank before every rank has issued it. A step of ``U``
units and ``k`` synchronised micro-batches has ``k`` forward all-gathers per unit, the
backward's re-gathers (none when the parameters stay gathered, ``SHARD_GRAD_OP``) and a
reduce-scatter per unit per synchronised micro-batch: the replay's ``n_collectives``.

**Slack.** With one unit prefetched (FSDP2's default, :mod:`gradsched.planners.sharded`;
FSDP1's ``BACKWARD_PRE``), the all-gather of unit ``j + 1`` runs on the communication
channel while unit ``j`` computes, so the collective that unit ``j + 1`` waits for has the
compute time of unit ``j`` to finish in. In the forward the channel carries the next unit's
all-gather; in the backward the previous unit's all-gather (if resharded) and the
reduce-scatter of the unit just computed. A unit's **slack share** is
``1 - channel time / unit compute``: the share of the unit's compute by which the slowest
rank may reach the collective late without delaying anyone's next unit.

**When the per-sync waits would cost.** If rank ``i``'s compute of each unit varies
independently, ``t (1 + c_u Z)``, the slowest of ``P`` ranks is late by ``c_u e_P t`` in
expectation (:func:`gradsched.costmodel.stragglers.expected_max_normal`). A synchronisation
costs only where that lateness exceeds the slack, i.e. for ``c_u > slack / e_P``
(``bind_cv``, the smallest over the step's units); below it the lateness is absorbed and the
ranks meet, bindingly, once per step (the optimizer waits for the last reduce-scatter and
the next step's first all-gather for every rank), which is the per-step model
:func:`gradsched.costmodel.stragglers.apply_stragglers` prices. Independent per-unit jitter
of ``c_u`` adds up over the ``n`` compute intervals of the step to a per-step variation of
``c_u / sqrt(n)`` (intervals of equal length); so if ``bind_cv / sqrt(n)`` exceeds the
measured per-step variation, not even all of the measured variation, taken as per-unit
jitter, would make a unit synchronisation bind (``binding`` false).

**The per-sync wait** (the switchable effect, ``unit_jitter``): where a unit's slack share
``s`` is below ``c_u e_P``, the expected slowest rank reaches the collective
``t (c_u e_P - s)`` after the channel could have finished it, and every rank waits that long;
the step gains ``sum over units of t max(0, c_u e_P - s)`` (first order: the waits are
small against the step, so they do not move the later units' slack), once per synchronised
micro-batch. ``c_u`` is the independent per-interval jitter measured on Kineto traces of
identical steps (:mod:`gradsched.experiments.at_scale.unit_jitter`): the jitter of one
millisecond of kernels, so of every unit at least that long an upper bound.

The check uses the replay's own unit compute and collective times (the point's comm model
and calibrated utilisation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gradsched.costmodel.stragglers import expected_max_normal
from gradsched.errors import ConfigError
from gradsched.replay.sharded_layout import UnitLayout
from gradsched.traces.layers import LayerSeq


@dataclass(frozen=True, eq=False)
class SyncSlack:
    """The synchronisation points of one step and their slack (module docstring); compared
    by identity (it holds arrays)."""

    sync_points: int
    slack_share: float
    bind_cv: float
    bind_step_cv: float
    shares: np.ndarray
    compute_s: np.ndarray
    e_p: float

    def wait_s(self, unit_cv: float) -> float:
        """Expected wait of one synchronised micro-batch for the slowest rank at its unit
        synchronisations, with independent per-unit jitter ``unit_cv`` (module docstring)."""
        if not 0.0 <= unit_cv < 1.0:
            raise ConfigError(f"per-unit jitter {unit_cv!r} is outside [0, 1)")
        late = unit_cv * self.e_p - np.maximum(self.shares, 0.0)
        return float(np.sum(self.compute_s * np.maximum(late, 0.0)))

    def binding(self, step_cv: float) -> bool:
        """Whether per-unit jitter adding up to the per-step variation ``step_cv`` could
        make a unit synchronisation bind."""
        return self.bind_step_cv < step_cv


def unit_compute_s(seq: LayerSeq, layout: UnitLayout) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward compute seconds of each unit (the root excluded)."""
    fwd = np.array([seq.forward_s[a:b + 1].sum() for a, b in layout.ranges], dtype=float)
    bwd = np.array([seq.backward_s[a:b + 1].sum() for a, b in layout.ranges], dtype=float)
    return fwd, bwd


def unit_slack(fwd_s: np.ndarray, bwd_s: np.ndarray, ag_s: np.ndarray, rs_s: np.ndarray, *,
               regather: np.ndarray | bool) -> np.ndarray:
    """Slack share of every unit in the forward and the backward (module docstring), block
    units only: ``ag_s``/``rs_s`` per unit in forward order (the root's not included).

    Forward, unit ``j`` covers the all-gather of ``j + 1`` (the last unit: none). Backward
    (units in reverse order), unit ``j`` covers the re-gather of ``j - 1`` where
    ``regather`` (per unit, or one flag for all: the unit was resharded after its forward)
    and the reduce-scatter of ``j + 1``, issued when that unit's gradients were done.
    A unit with no compute has no slack to give (share 0)."""
    n = len(fwd_s)
    if not (len(bwd_s) == len(ag_s) == len(rs_s) == n) or n == 0:
        raise ConfigError("unit_slack: the per-unit arrays must be non-empty and equally long")
    nxt = np.append(ag_s[1:], 0.0)
    fwd_channel = nxt
    again = np.broadcast_to(np.asarray(regather, dtype=bool), (n,))
    prev_ag = np.insert(np.where(again, ag_s, 0.0)[:-1], 0, 0.0)
    later_rs = np.append(rs_s[1:], 0.0)
    bwd_channel = prev_ag + later_rs
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(fwd_s > 0, 1.0 - fwd_channel / fwd_s, 0.0)
        b = np.where(bwd_s > 0, 1.0 - bwd_channel / bwd_s, 0.0)
    return np.concatenate([f, b])


def sync_slack(shares: np.ndarray, compute_s: np.ndarray, sync_points: int,
               world: int) -> SyncSlack:
    """The step's :class:`SyncSlack` from its units' slack shares and compute seconds (the
    order of :func:`unit_slack`: forward units, then backward) at ``world`` ranks."""
    if world < 2:
        raise ConfigError("sync_slack: one rank has no one to wait for")
    shares = np.asarray(shares, dtype=float)
    compute_s = np.asarray(compute_s, dtype=float)
    if shares.shape != compute_s.shape or shares.size == 0:
        raise ConfigError("sync_slack: one slack share per unit compute time")
    e_p = expected_max_normal(int(world))
    slack = float(max(np.min(shares), 0.0))
    n = len(shares)
    return SyncSlack(sync_points=int(sync_points), slack_share=slack,
                     bind_cv=slack / e_p, bind_step_cv=slack / e_p / math.sqrt(n),
                     shares=shares, compute_s=compute_s, e_p=e_p)
