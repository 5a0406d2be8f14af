r"""The text of a prose macro: its name's letters-only form and its number's fixed point.

Shared by :mod:`gradsched.report.macros` and the modules that compute one group of macros
each (:mod:`.trace_facts`, :mod:`.burst`), so that they need not import one another.
"""

from __future__ import annotations

import math
import re

NA = "n/a"
"""The text of a macro whose input is missing: never an invented number."""

_DIGITS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five",
           "6": "Six", "7": "Seven", "8": "Eight", "9": "Nine"}


def camel(text: str) -> str:
    """``alpha-beta`` -> ``AlphaBeta`` (letters only, as TeX control words need)."""
    parts = re.split(r"[^A-Za-z0-9]+", text)
    words = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return "".join(_DIGITS.get(ch, ch) for ch in words)


def number(value: float | None, digits: int = 1) -> str:
    """Fixed point with ``digits`` decimals, or :data:`NA` for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NA
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.0"
