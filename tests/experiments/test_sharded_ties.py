"""The sharded optimum's comparison of candidates: a time within :data:`gradsched.ties.RTOL`
is a tie, decided by fewer units, then the smaller peak, then the enumeration order."""

from __future__ import annotations

import numpy as np

from gradsched.ties import better

T = 0.30994  # seconds (synthetic)


def test_one_ulp_faster_with_more_units_does_not_win() -> None:
    below = float(np.nextafter(T, 0.0))
    assert not better((below, 5, 1e9), (T, 3, 1e9))
    assert better((np.nextafter(T, 1.0), 2, 1e9), (T, 3, 1e9))  # tied, fewer units


def test_equal_keys_keep_the_incumbent_and_a_real_gain_wins() -> None:
    assert not better((T, 3, 1e9), (T, 3, 1e9))
    assert better((T * 0.999, 9, 1e12), (T, 1, 1.0))
    assert better((T, 0), (np.inf, 0))  # the dynamic program's unset entry
