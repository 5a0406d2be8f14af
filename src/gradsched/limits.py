"""Physical ranges every duration, size and count gradsched reads must fall in.

An input outside these ranges is refused with a clear error instead of overflowing
(a 1e300 s layer or an 8e18-byte tensor made sums of seconds infinite and sums of int64
bytes wrap) or exhausting the machine (a plan with 1e9 chunks per bucket). The bounds are
generous: far beyond any measured layer, message or cluster, and far below the values
that overflow float64 sums or int64 byte counts.
"""

from __future__ import annotations

import math
import os

MAX_SECONDS = 1e6
"""Longest duration accepted anywhere (about 11.6 days): layer times, collective times,
alpha, timeouts, deadlines."""

MAX_BYTES = 2**50
"""Largest tensor or message accepted (1 PiB): sums of many stay far below int64."""

MAX_RANKS = 2**20
"""Largest world size accepted (about a million ranks)."""

MAX_REPLAY_ITERATIONS = 10_000
"""Most iterations the replay simulates (steady state is reached after a few)."""

MAX_GRAD_ACCUM = 4096
"""Most micro-batches per optimizer step (gradient accumulation) the replays and runs take."""

MAX_KNOB_MAGNITUDE = 1e15
"""Largest magnitude of a numeric planner knob (MB, bytes, parameters, seconds or counts),
for the DDP-style and the sharded planners alike."""

MAX_COLLECTIVES_PER_ITERATION = 100_000
"""Most collectives one plan may launch per iteration (sum of its buckets' chunks)."""


def is_real(value: object) -> bool:
    """True for an int or float that is not a bool (JSON numbers)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def in_range(value: float, low: float, high: float, *, low_open: bool = False) -> bool:
    """``low <= value <= high`` (``low < value`` when ``low_open``) and finite; NaN fails."""
    if not math.isfinite(value):
        return False
    return (value > low if low_open else value >= low) and value <= high


def physical_memory_bytes() -> int | None:
    """Installed memory of this machine (``sysconf``), or None where it cannot be read."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def is_grad_accum(value: object) -> bool:
    """Whether ``value`` is a number of micro-batches per optimizer step: an int (not a
    bool) in ``[1, MAX_GRAD_ACCUM]``."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and 1 <= value <= MAX_GRAD_ACCUM)
