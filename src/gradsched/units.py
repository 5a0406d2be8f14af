"""Units of the command lines and configs: message sizes in bytes.

:func:`parse_int` and :func:`parse_real` are the one grammar of integers and numbers
typed by a person (ASCII decimals: Python's ``int()`` and ``float()`` also take ``1_6`` and
non-ASCII digits). :func:`parse_size` is the one size grammar of every option and config
key that takes a size (``capture comm --min-bytes/--max-bytes``, ``bench collectives``,
``cluster check --bytes``, ``compress --sizes``, ``reexec interference --comm-bytes/
--small-bytes``).
``docs/units.md`` describes it for users.
"""

from __future__ import annotations

import math
import re

from gradsched.errors import ConfigError
from gradsched.limits import MAX_BYTES

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$", re.ASCII)
_PREFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE_UNITS = {"": 1, "b": 1}
for _p, _scale in _PREFIXES.items():
    if _p:
        for _tail in ("", "i", "b", "ib"):
            _SIZE_UNITS[_p + _tail] = _scale


_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_REAL_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
_REAL_WORDS = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity",
                         "+infinity", "-infinity"})


def parse_int(text: str) -> int:
    """Plain ASCII decimal digits with an optional sign, nothing else: Python's ``int()``
    also takes ``1_6`` and non-ASCII digits (``１６``), which an option must not.
    Raises ``ValueError``."""
    stripped = text.strip()
    if not _INT_RE.fullmatch(stripped) or len(stripped) > 40:
        raise ValueError(f"{text!r} is not an integer (ASCII digits only)")
    return int(stripped)


def parse_real(text: str) -> float:
    """A decimal number in ASCII (``1``, ``0.5``, ``1e-3``); ``nan``/``inf`` are parsed so
    that the caller can name them, ``1_0`` and non-ASCII digits are refused.
    Raises ``ValueError``."""
    stripped = text.strip()
    if stripped.lower() in _REAL_WORDS:
        return float(stripped)
    if not _REAL_RE.fullmatch(stripped) or len(stripped) > 64:
        raise ValueError(f"{text!r} is not a number (ASCII digits only)")
    return float(stripped)


def parse_size(text: str | int, *, minimum: int = 1) -> int:
    """A size in bytes: ``4``, ``64K``, ``256M``, ``1G``, ``1.5K`` -> 4, 65536, 268435456,
    1073741824, 1536.

    Grammar (whitespace around the number and the unit is ignored)::

        size   := number [unit]
        number := digits ["." digits]          (ASCII 0-9; no sign, no exponent)
        unit   := "B" | prefix ["i"] ["B"]     (any letter case)
        prefix := "K" | "M" | "G"              (binary: 1024, 1024**2, 1024**3)

    Every multiple is binary, as in nccl-tests: ``K``, ``Ki``, ``KB`` and ``KiB`` all mean
    1024 bytes (``KB`` is *not* 1000). The value must be a whole number of bytes (``1.5K``
    is 1536, ``1.5`` is refused), at least ``minimum`` (1 unless the caller needs more,
    e.g. 4 for one fp32 element) and at most :data:`~gradsched.limits.MAX_BYTES` (1 PiB).
    An ``int`` is read as its decimal text. Anything else raises
    :class:`~gradsched.errors.ConfigError` naming the text.
    """
    match = _SIZE_RE.match(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _SIZE_UNITS:
        raise ConfigError(f"size {text!r}: expected bytes with an optional K/M/G suffix "
                          "(binary: 64K = 64KiB = 64KB = 65536), e.g. 4, 64K, 256M")
    value = float(match.group(1)) * _SIZE_UNITS[unit]
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise ConfigError(f"size {text!r} is not a positive whole number of bytes")
    if value > MAX_BYTES:
        raise ConfigError(f"size {text!r} is beyond {MAX_BYTES} bytes (1 PiB)")
    if value < minimum:
        raise ConfigError(f"size must be >= {minimum} bytes, got {text!r}")
    return int(value)


__all__ = ["parse_int", "parse_real", "parse_size"]
