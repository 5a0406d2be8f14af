"""The lower bound's delivery times ``D_j`` (``replay/bounds.py``, fact 2-3) equal their
definition, computed here cell by cell, on random traces in any ready order; and the
segment tree behind the any-order case equals a plain array. Traces are SYNTHETIC."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.replay import bounds
from gradsched.replay.prefix_tree import PrefixAddMaxTree, SuffixSums
from gradsched.replay.prep import trace_arrays
from tests.replay.test_bounds import random_trace


def delivery_by_definition(a, rate_Bps: float, startup_s: float) -> np.ndarray:
    """``max_t [t + s + bytes of layers <= j ready at or after t / b]`` over every ready
    time, the bytes summed per cell: ``O(N^2)``."""
    times = np.unique(a.ready_s)
    out = np.full(a.layer_forward_s.size, -np.inf)
    for j in range(out.size):
        for t in times:
            mask = (a.layer_of <= j) & (a.ready_s >= t)
            taken = float(a.nbytes[mask].sum())
            if taken > 0:
                out[j] = max(out[j], t + startup_s + taken / rate_Bps)
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.booleans(),
       st.sampled_from([1e8, 1e9, 3e10]), st.sampled_from([0.0, 2e-5, 1e-3]))
def test_delivery_equals_its_definition(seed: int, n: int, in_ready_order: bool,
                                        rate: float, startup: float) -> None:
    trace = random_trace(seed, n)
    if in_ready_order:  # backprop's order: the input side's gradient is ready last
        frame = trace.frame.assign(ready_order=np.arange(n)[::-1])
        trace = type(trace).from_frame(frame, trace.meta)
    a = trace_arrays(trace)
    got = bounds.delivery_s(a, rate, startup)
    assert np.allclose(got, delivery_by_definition(a, rate, startup), rtol=1e-12, atol=0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40))
def test_both_paths_agree_bit_for_bit_in_ready_order(seed: int, n: int) -> None:
    trace = random_trace(seed, n)
    trace = type(trace).from_frame(trace.frame.assign(ready_order=np.arange(n)[::-1]),
                                   trace.meta)
    a = trace_arrays(trace)
    times, slot_of = np.unique(a.ready_s, return_inverse=True)
    order = np.lexsort((-slot_of, a.layer_of))
    fast = bounds._delivery_in_ready_order(a, order, times[slot_of[order]], 1e9, 1e-4)
    tree = bounds._delivery_any_order(a, order, times, slot_of[order], 1e9, 1e-4)
    assert np.array_equal(fast, tree)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fill", "add"]), st.integers(0, 30),
                          st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=60),
       st.integers(1, 31))
def test_tree_equals_a_plain_array(ops: list, n: int) -> None:
    tree, sums = PrefixAddMaxTree(n), SuffixSums(n)
    plain, plain_sums = np.full(n, -np.inf), np.zeros(n)
    for op, slot, value in ops:
        slot %= n
        if op == "fill":
            tree.fill(slot, value)
            plain[slot] = value
        else:
            tree.add_prefix(slot, value)
            plain[:slot + 1] += value
            sums.add(slot, value)
            plain_sums[slot] += value
        assert np.isclose(tree.max(), plain.max()) or tree.max() == plain.max() == -np.inf
        if np.isfinite(plain.max()):
            assert np.isclose(plain[tree.argmax()], plain.max())
        assert np.isclose(sums.from_slot(slot), plain_sums[slot:].sum())
