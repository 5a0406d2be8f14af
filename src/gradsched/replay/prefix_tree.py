"""Two trees for prefix operations in ``O(log n)``: a max segment tree over slots that start
empty (fill a slot, add a value to every slot of a prefix ``[0, q]``, find the slot holding
the maximum), and the exact suffix sums that go with it.

The bottom-up layout with lazy additions at internal nodes is the well-known
non-recursive segment tree: ``t[p]`` is the maximum of ``p``'s subtree including the
additions made at ``p`` and below, ``lazy[p]`` the additions made at ``p`` for its whole
subtree. Plain Python lists: each operation touches ``O(log n)`` scalars, where numpy's
per-call overhead would dominate.
"""

from __future__ import annotations

import math


class PrefixAddMaxTree:
    """``n`` slots, empty (``-inf``) until filled (see the module docstring)."""

    def __init__(self, n: int) -> None:
        self.size = 1 << max(n - 1, 0).bit_length()
        self.height = self.size.bit_length() - 1
        self.t = [-math.inf] * (2 * self.size)
        self.lazy = [0.0] * self.size

    def _apply(self, p: int, value: float) -> None:
        self.t[p] += value
        if p < self.size:
            self.lazy[p] += value

    def _rebuild(self, p: int) -> None:
        t, lazy = self.t, self.lazy
        while p > 1:
            p >>= 1
            t[p] = max(t[2 * p], t[2 * p + 1]) + lazy[p]

    def _push(self, p: int) -> None:
        for s in range(self.height, 0, -1):
            i = p >> s
            if self.lazy[i] != 0.0:
                self._apply(2 * i, self.lazy[i])
                self._apply(2 * i + 1, self.lazy[i])
                self.lazy[i] = 0.0

    def fill(self, slot: int, value: float) -> None:
        """Set slot ``slot`` to ``value`` (additions made before no longer apply to it)."""
        p = slot + self.size
        self._push(p)
        self.t[p] = value
        self._rebuild(p)

    def add_prefix(self, last: int, value: float) -> None:
        """Add ``value`` to slots ``0..last`` (an empty slot stays empty)."""
        lo, hi = self.size, last + 1 + self.size
        lo0, hi0 = lo, hi
        while lo < hi:
            if lo & 1:
                self._apply(lo, value)
                lo += 1
            if hi & 1:
                hi -= 1
                self._apply(hi, value)
            lo >>= 1
            hi >>= 1
        self._rebuild(lo0)
        self._rebuild(hi0 - 1)

    def max(self) -> float:
        return self.t[1]

    def argmax(self) -> int:
        """The slot holding the maximum (the leftmost of equal ones)."""
        p = 1
        while p < self.size:
            p = 2 * p if self.t[2 * p] >= self.t[2 * p + 1] else 2 * p + 1
        return p - self.size


class SuffixSums:
    """Sums of slots ``k..n-1`` with point additions, ``O(log n)`` each (a Fenwick tree
    over the reversed slots). Adds in the order given, so integer-valued floats below 2^53
    sum exactly."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tree = [0.0] * (n + 1)

    def add(self, slot: int, value: float) -> None:
        i = self.n - slot
        while i <= self.n:
            self.tree[i] += value
            i += i & -i

    def from_slot(self, slot: int) -> float:
        """The sum of slots ``slot..n-1``."""
        total, i = 0.0, self.n - slot
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total
