"""A price that never falls as the message grows, from NCCL's size-based choice.

NCCL picks the algorithm and protocol per size with its own constants (:func:`.tuning.select`);
priced with calibrated inputs, the pair it picks just below a switch can cost more than the
pair it picks just above it, and the tree's size-dependent correction (tuning.cc L639-642)
can make a larger message of the same pair cheaper. A planner merging buckets would exploit
such a drop, which no real transfer offers beyond padding: a message can always be sent as a
larger one. So a message of ``m`` bytes is priced at the cheapest of NCCL's prices at any size
``m' >= m``:

    T(m) = min(T_nccl(m), min over piece starts s > m of T_nccl(s))

exactly: between two consecutive *piece starts* (a change of NCCL's choice, found by
bisection to double precision, a power-of-two boundary ``64 * 2^k`` of the tree
correction, or a size at which NCCL adds a channel, :func:`.tuning.channel_steps`) the
chosen pair's latency and bandwidth are fixed, except the ring plateau that
only raises the latency, so the price rises within a piece and its minimum over ``[s, next)``
is at ``s``.
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.nccl.hardware import Hardware
from gradsched.costmodel.nccl.tuning import Params, channel_steps, select

GRID_BYTES = np.geomspace(1.0, 2.0**44, 44 * 16 + 1)
"""Where the choice is probed for switches (1/16 of an octave apart, 1 B to 16 TiB)."""
_BISECTIONS = 64


def piece_starts(hw: Hardware, params: Params, collective: str, world_size: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, prices) of every piece start in :data:`GRID_BYTES`' range, sorted by size,
    and the suffix minimum of the prices (``out[1][i]`` = cheapest price at starts ``>= i``)."""
    idx = select(hw, params, collective, GRID_BYTES, world_size)[1]
    cells = np.flatnonzero(idx[1:] != idx[:-1])
    lo, hi = GRID_BYTES[cells].copy(), GRID_BYTES[cells + 1].copy()
    left = idx[cells]
    for _ in range(_BISECTIONS):  # every switch at once
        mid = 0.5 * (lo + hi)
        same = select(hw, params, collective, mid, world_size)[1] == left
        lo = np.where(same, mid, lo)
        hi = np.where(same, hi, mid)
    pow2 = 64.0 * 2.0 ** np.arange(0, 39)
    starts = np.unique(np.concatenate([hi, pow2, channel_steps(hw, world_size)]))
    prices = select(hw, params, collective, starts, world_size)[0]
    suffix = np.minimum.accumulate(prices[::-1])[::-1]
    return starts, suffix


def monotone_times(hw: Hardware, params: Params, collective: str, nbytes: np.ndarray,
                   world_size: int, starts: np.ndarray, suffix: np.ndarray) -> np.ndarray:
    """:math:`T(m)` of the module docstring for each of ``nbytes``."""
    m = np.asarray(nbytes, dtype=float)
    own = select(hw, params, collective, m, world_size)[0]
    nxt = np.searchsorted(starts, m, side="right")
    later = np.where(nxt < starts.size, suffix[np.minimum(nxt, starts.size - 1)], np.inf)
    return np.minimum(own, later)
