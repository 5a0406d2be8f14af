"""Interval algebra on ``(start, end)`` pairs: union, difference, overlap and length."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merge intervals into disjoint sorted ones."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def subtract(a: Sequence[tuple[float, float]],
             b: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Disjoint sorted ``a`` minus disjoint sorted ``b``."""
    out: list[tuple[float, float]] = []
    j = 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def intersection_length(a: Sequence[tuple[float, float]],
                        b: Sequence[tuple[float, float]]) -> float:
    """Total length of the intersection of two disjoint sorted interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def length(a: Sequence[tuple[float, float]]) -> float:
    """Total length of disjoint intervals."""
    return float(sum(e - s for s, e in a))
