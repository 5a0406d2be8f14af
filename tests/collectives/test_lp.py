"""LP chunking follows the formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradsched.collectives import lp
from gradsched.costmodel.formulas import optimal_chunk


def test_lp_chunking_follows_the_formula() -> None:
    link = lp.DEFAULT_LINK
    m = 1 << 22
    b = lp.optimal_chunk_bytes("all_reduce", m, 4, link)
    assert b == pytest.approx(float(optimal_chunk("all_reduce", "lp", np.array([m]), 4,
                                                  link.alpha_s, link.beta_s_per_byte,
                                                  link.gamma_s_per_byte)[0]))
    elems = lp.chunk_elements(m // 4, 4, "all_reduce", 4, None, link)
    assert elems == int(b // 4)
    # At least one element, at most MAX_CHUNKS chunks, never more than the vector.
    assert lp.chunk_elements(10, 4, "all_reduce", 4, chunk_bytes=1) == 1
    assert lp.chunk_elements(10**6, 4, "all_reduce", 4, chunk_bytes=4) == math.ceil(
        10**6 / lp.MAX_CHUNKS)
    assert lp.chunk_elements(5, 4, "broadcast", 3, chunk_bytes=1 << 20) == 5
