"""The wire floor: no collective moves its bytes faster than the sustained bandwidth.

A measured sweep can be faster than the wire at small and medium sizes: a ``tc tbf`` token
bucket lets a burst of up to its bucket size through at line speed of the host (the
emulated 100 Mbit/s links measured 30.1 MB/s busbw for 64 KiB all-reduces on a
12.5 MB/s link), and caches make host-memory collectives faster at medium sizes. A model
that learns those points lets a planner split m bytes into pieces that, together, take less
than m at the sustained rate, a schedule no real network can run.

Every model therefore answers with ``T_c(m) = max(T_raw,c(m), s_c + f_c * m / b)``
(:meth:`gradsched.costmodel.base.CommModel.times`), where

* ``s_c`` is the collective's start-up (the model's smallest time at any size: the part
  of a collective the replay lets overlap with other collectives),
* ``f_c`` is the ring-algorithm share of an all-reduce's traffic that collective ``c``
  moves (:data:`~gradsched.costmodel.base.DERIVED_FROM_ALL_REDUCE`: 1 for all-reduce, 1/2
  for reduce-scatter and all-gather; Thakur, Rabenseifner & Gropp 2005, Sec. 4), so a
  reduce-scatter plus an all-gather of m bytes costs at least one all-reduce of m bytes;
  1 for a point-to-point message (``p2p``: its m bytes cross one link once, as a ring
  all-reduce on 2 ranks sends m bytes over each link, so on a link of rate r no message
  beats ``m / r``),
* ``b`` is the *sustained* all-reduce algorithm bandwidth (bytes of message per second)
  among large messages (within a factor :data:`LARGE_REGION` of the largest size the
  model holds; :func:`sustained_algbw`), capped at the line rate
  where that is known (``line_rate_Bps``: the emulated cluster's ``rate``, a per-rank
  link speed; a ring all-reduce sends ``2(P-1)/P`` of the message over each link, so
  ``b <= rate * P / (2(P-1))``; nccl-tests' bus bandwidth is the same quantity).

The replay's lower bound (:mod:`gradsched.replay.bounds`) uses the same ``b``, so no plan
can beat it: the bandwidth phase of every collective of m bytes lasts at least
``f_c * m / b`` and concurrent collectives share one bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LARGE_REGION = 64.0
"""Messages of at least ``reference / LARGE_REGION`` bytes count as large."""

TOLERANCE = 0.02
"""A measured point is flagged when it is more than this fraction below the floor."""


def ring_algbw_limit(line_rate_Bps: float, world_size: int) -> float:
    """Largest all-reduce algorithm bandwidth a ring can reach on links of ``line_rate_Bps``
    (bytes/s per rank and direction): ``rate * P / (2 (P - 1))``."""
    if world_size <= 1:
        return float("inf")
    return float(line_rate_Bps) * world_size / (2.0 * (world_size - 1))


def sustained_algbw(nbytes: np.ndarray, times: np.ndarray, startup_s: float,
                    share: float = 1.0) -> float:
    """The sustained all-reduce bandwidth (bytes/s) of a curve of collective ``share``
    (its :data:`DERIVED_FROM_ALL_REDUCE` factor) among the large messages: the larger of
    the best chord rate ``share * m / (T(m) - s)`` and the marginal rate ``share / slope``
    of a least-squares line through them (a curve whose per-byte cost still falls at its
    largest sizes has a chord slower than its marginal rate); ``inf`` where the curve has
    no bandwidth term there."""
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    if m.size == 0:
        return float("inf")
    large = m >= float(np.max(m)) / LARGE_REGION
    m, t = m[large], t[large]
    work = t - startup_s
    ok = work > 0
    if not np.any(ok):
        return float("inf")
    with np.errstate(over="ignore", divide="ignore"):  # a flat curve: an infinite rate
        rate = float(np.max(share * m[ok] / work[ok]))
        if np.unique(m).size >= 2:
            slope = float(np.polyfit(m, t, 1)[0])
            if slope > 0:
                rate = max(rate, share / slope)
    return rate


@dataclass(frozen=True)
class WireCheck:
    """What :func:`check_series` found in one measured series."""

    algbw_Bps: float
    source: str  # "line rate" or "large messages"
    startup_s: float
    flagged_bytes: tuple[float, ...]
    worst_ratio: float  # smallest measured time / floor time (1 = on the floor)

    def note(self, collective: str, world_size: int) -> str | None:
        """A warning for the fit notes, or ``None`` if no point beats the wire."""
        if not self.flagged_bytes:
            return None
        sizes = ", ".join(f"{b:.0f}" for b in self.flagged_bytes[:6])
        more = "..." if len(self.flagged_bytes) > 6 else ""
        return (f"{collective} P={world_size}: {len(self.flagged_bytes)} size(s) measured "
                f"faster than the sustained bandwidth ({self.algbw_Bps / 1e6:.4g} MB/s "
                f"all-reduce algbw, from the {self.source}), down to "
                f"{100 * self.worst_ratio:.0f}% of the floor (bytes {sizes}{more}): a burst "
                "region (token bucket, caches); the model is clipped to the wire floor there")


STARTUP_PROBE_BYTES = 4096.0
"""Largest smallest-size at which a sweep's smallest time is taken as its start-up (a page;
nccl-tests and OSU sweeps begin at 1-8 bytes, every sweep captured here at 4)."""


def floor_startup(nbytes: np.ndarray, times: np.ndarray, startup_s: float,
                  s_per_byte: float) -> float:
    """The start-up ``s`` of the floor ``s + s_per_byte * m`` of a curve sampled at
    ``nbytes`` (ascending) with ``times``.

    Where the smallest size is a start-up probe (at most :data:`STARTUP_PROBE_BYTES`), its
    time is the start-up: ``startup_s``. A sweep that begins at, say, 1 MiB (public
    nccl-tests lookup tables) has no such point: its smallest time includes a transfer,
    and a start-up taken from it lifts the floor above points that run slower than the
    wire (on an 8-GPU sweep from 1 MiB, by 8-28 % at 1-8 MiB). There the start-up is the
    largest one under which no point slower than the sustained rate lies below the floor,
    ``min (t_i - s_per_byte * m_i)`` over those points, clipped to ``[0, startup_s]``;
    only a point faster than the sustained rate itself stays below the floor.
    """
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    if m.size == 0 or s_per_byte <= 0.0 or m[0] <= STARTUP_PROBE_BYTES:
        return float(startup_s)
    slack = t - s_per_byte * m
    wire_bound = slack >= -TOLERANCE * s_per_byte * m
    if not np.any(wire_bound):
        return 0.0
    return float(min(max(float(np.min(slack[wire_bound])), 0.0), startup_s))


def check_series(nbytes: np.ndarray, times: np.ndarray, world_size: int,
                 share: float = 1.0, line_rate_Bps: float | None = None) -> WireCheck:
    """Find the points of a measured series below the wire floor (see module docstring;
    the start-up as :func:`floor_startup` sets it)."""
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    algbw = sustained_algbw(m, t, float(np.min(t)), share)
    source = "large messages"
    if line_rate_Bps is not None:
        limit = ring_algbw_limit(line_rate_Bps, world_size)
        if limit < algbw:
            algbw, source = limit, "line rate"
    startup = floor_startup(m, t, float(np.min(t)), share / algbw)
    floor = startup + share * m / algbw
    ratio = t / floor
    flagged = m[ratio < 1.0 - TOLERANCE]
    return WireCheck(algbw, source, startup, tuple(float(b) for b in flagged),
                     float(np.min(ratio)) if ratio.size else 1.0)
