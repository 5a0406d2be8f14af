"""An event's ``ts``/``dur`` read with a fast path for plain floats and ints: the same value
or the same refusal as the full check, for every kind of JSON value (planted events)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.events import _time_field


def full_check(ev: dict[str, Any], key: str) -> float:
    """The check without the fast path."""
    value = ev.get(key)
    if isinstance(value, str | bool) or not isinstance(value, int | float) \
            or not np.isfinite(value):
        raise InputError("refused")
    return float(value)


@pytest.mark.parametrize("value", [0.0, 1.5, -2.25, 1e300, 5e-324, 0, 7, -3, 2**61,
                                   2**62, 2**70, True, False, "1.0", None, math.nan,
                                   math.inf, -math.inf, [1.0]])
def test_the_fast_path_reads_what_the_full_check_reads(value: Any) -> None:
    ev = {"name": "k", "ts": value}
    try:
        expected: float | None = full_check(ev, "ts")
    except (InputError, TypeError, OverflowError):
        expected = None
    if expected is None:
        with pytest.raises((InputError, TypeError, OverflowError)):
            _time_field(ev, "ts", "k", "trace.json", "traceEvents[0]")
    else:
        got = _time_field(ev, "ts", "k", "trace.json", "traceEvents[0]")
        assert type(got) is float and got == expected
