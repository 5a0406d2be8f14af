"""Argument types shared by the sub-command modules (not a sub-command itself).

Every numeric option goes through one of these: NaN, infinity, values out of range,
integers too large for the machine, and numbers Python would read but a person would not
write (``1_6``, non-ASCII digits such as ``１６``) are refused by argparse itself (exit 2,
one line naming the option) before any work starts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from gradsched.errors import ConfigError
from gradsched.limits import MAX_GRAD_ACCUM, MAX_RANKS, MAX_SECONDS
from gradsched.units import parse_int, parse_real, parse_size

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
            value = parse_real(text)
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
            value = parse_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or value > high:
            raise argparse.ArgumentTypeError(f"{value} is out of range [{low}, {high}]")
        return value

    parse.__name__ = "integer"
    return parse


def add_grad_accum(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                   what: str) -> None:
    """``--grad-accum K``: micro-batches per optimizer step (an integer in ``[1,
    MAX_GRAD_ACCUM]``; 0, -1, 1.5 or text are refused by argparse naming the option)."""
    parser.add_argument("--grad-accum", type=integer(1, MAX_GRAD_ACCUM), default=1,
                        metavar="K", help="gradient accumulation: K micro-batches per "
                        f"optimizer step, only the last communicating; {what} (default 1)")


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (and below int64 overflow)."""
    try:
        value = parse_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    if value > _INT_MAX:
        raise argparse.ArgumentTypeError(f"{value} is too large (at most {_INT_MAX})")
    return value


def _each(one: Callable[[str], object], parts: list[str], what: str) -> list[object]:
    """``one`` applied to every part; a refusal is prefixed with ``what`` (the list's name)."""
    try:
        return [one(v) for v in parts]
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{what}: {exc}" if what else str(exc)) from None


def int_list(low: int = -_INT_MAX, high: int = _INT_MAX, *, example: str = "2,3,4",
             what: str = "") -> Callable[[str], tuple[int, ...]]:
    """argparse type factory: comma-separated integers, each in ``[low, high]``; ``what``
    names them in errors."""
    one = integer(low, high)

    def parse(text: str) -> tuple[int, ...]:
        parts = [v for v in text.split(",") if v.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r}: expected integers like {example}")
        return tuple(_each(one, parts, what))  # type: ignore[arg-type]

    parse.__name__ = "integers"
    return parse


def real_list(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False,
              unit: str = "", example: str = "1,25", what: str = ""
              ) -> Callable[[str], list[float]]:
    """argparse type factory: comma-separated finite numbers, each in range; ``what`` names
    them in errors."""
    one = real(low, high, low_open=low_open, unit=unit)

    def parse(text: str) -> list[float]:
        parts = [v for v in text.split(",") if v.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like {example}")
        return _each(one, parts, what)  # type: ignore[return-value]

    parse.__name__ = "numbers"
    return parse


def size(minimum: int = 1) -> Callable[[str], int]:
    """argparse type factory: a size in bytes in the one size grammar
    (:func:`gradsched.units.parse_size`: ASCII digits, K/M/G suffixes, at most 1 PiB)."""

    def parse(text: str) -> int:
        try:
            return parse_size(text, minimum=minimum)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "size"
    return parse


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

threads = integer(1, 4096)
"""argparse type: intra-op threads per rank in ``[1, 4096]``."""

port = integer(1, 65535)
"""argparse type: a TCP port."""

HARDENED_TYPES = frozenset({"number", "integer", "integers", "numbers", "size", "positive_int"})
"""``__name__`` of every type above: ``tests/robustness/test_options.py`` asserts that each
numeric option of the command line uses one of them."""


def add_oversubscribe(parser: argparse.ArgumentParser) -> None:
    """The ``--oversubscribe`` option of every command that starts local ranks."""
    parser.add_argument("--oversubscribe", action="store_true",
                        help="start more threads (ranks x threads per rank) than "
                        "4 per usable CPU; the process and memory limits still apply")


def add_sharded_case(parser: argparse.ArgumentParser) -> None:
    """The case a sharded study replays: ``--compute``, ``--comm``, ``--world-size`` and
    ``--semantics`` (as ``shard accumulate`` and ``shard rival`` take them)."""
    parser.add_argument("--compute", required=True, help="compute trace CSV")
    parser.add_argument("--comm", required=True, help="comm sweep CSV, fitted model JSON or "
                        "inline alpha-beta, as for replay")
    parser.add_argument("--world-size", type=world_size, required=True)
    parser.add_argument("--semantics", choices=("streams", "blocking"), default="streams",
                        help="streams: collectives on their own streams (GPU, NCCL); "
                             "blocking: the host waits for each collective (FSDP2 on CPU "
                             "with gloo)")
