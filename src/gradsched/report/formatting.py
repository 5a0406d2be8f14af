"""Numbers as table text: fixed-point, and one placeholder for a missing value.

Every table builder of the study modules formats its cells with :func:`fmt`, so that a NaN
or a missing input reads the same everywhere (:data:`MISSING`).
"""

from __future__ import annotations

import math

MISSING = "--"


def fmt(value: object, digits: int = 2) -> str:
    """Fixed-point text, or :data:`MISSING` for NaN/None."""
    if value is None:
        return MISSING
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return MISSING
    return f"{number:.{digits}f}"
