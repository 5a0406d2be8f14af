"""Argument types shared by the sub-command modules (not a sub-command itself).

Every numeric option goes through one of these: NaN, infinity, values out of range and
integers too large for the machine are refused by argparse itself (exit 2, one line naming
the option) before any work starts (unchecked, ``--compute-slowdown nan`` would hang the replay).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from gradsched.limits import MAX_RANKS, MAX_SECONDS

_INT_MAX = 2**62  # below int64 overflow in any sum gradsched forms


def _show(value: float) -> str:
    return f"{value:g}"


def real(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False,
         unit: str = "") -> Callable[[str], float]:
    """argparse type factory: a finite float in ``[low, high]`` (``(low, high]`` when
    ``low_open``); NaN and infinities are always refused."""
    suffix = f" {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        too_low = value <= low if low_open else value < low
        if too_low or value > high:
            left = "(" if low_open else "["
            raise argparse.ArgumentTypeError(
                f"{text} is out of range {left}{_show(low)}, {_show(high)}]{suffix}")
        return value

    parse.__name__ = "number"
    return parse


def integer(low: int = -_INT_MAX, high: int = _INT_MAX) -> Callable[[str], int]:
    """argparse type factory: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or value > high:
            raise argparse.ArgumentTypeError(f"{value} is out of range [{low}, {high}]")
        return value

    parse.__name__ = "integer"
    return parse


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (and below int64 overflow)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    if value > _INT_MAX:
        raise argparse.ArgumentTypeError(f"{value} is too large (at most {_INT_MAX})")
    return value


world_size = integer(1, MAX_RANKS)
"""argparse type: a rank count in ``[1, MAX_RANKS]``."""

seconds = real(0.0, MAX_SECONDS, unit="s")
"""argparse type: a duration in ``[0, MAX_SECONDS]`` seconds."""

positive_seconds = real(0.0, MAX_SECONDS, low_open=True, unit="s")
"""argparse type: a duration in ``(0, MAX_SECONDS]`` seconds."""

count = integer(1, 10**9)
"""argparse type: a count of iterations, repetitions or steps in ``[1, 1e9]``."""

non_negative_count = integer(0, 10**9)
"""argparse type: a count in ``[0, 1e9]`` (warm-up iterations may be 0)."""
