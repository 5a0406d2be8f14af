"""When two iteration times are the same: one relative tolerance, and the fixed tie-break.

Every place that picks the fastest of several candidates (a planner's search, ``best``,
``search``, a recommendation, a table's "fastest" column, a macro naming a winner) asks
this module, so that a winner is never decided by floating-point noise.

:data:`RTOL` = 1e-9 (relative). Why this value:

* *Above the noise.* Two plans of equal time are priced through different sums of the same
  doubles (machine epsilon 2.2e-16): an iteration of ~1e4 events accumulates at most ~1e-12
  relative error, and a fitted cost model whose least-squares solve runs through another
  BLAS kernel (OpenBLAS's AVX-512 against its Haswell kernel) moves its coefficients in the
  16th digit. Both sit three or more orders of magnitude below 1e-9.
* *Below anything real.* The traces resolve microseconds at best (Kineto and nccl-tests
  report microseconds, B-Caffe milliseconds): 1e-9 of a 1 s iteration is 1 ns, three orders
  below the resolution of any input, so no difference the inputs can support is called a tie.

Ties are broken by the candidates' *fixed order*, never by their values: the caller's order
(the order its candidates are generated in, or the algorithms' usual order in a table); the
first member of the tied set wins. The tied set is measured from the minimum: a value ties
when :func:`same_time` holds between it and the smallest value.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

RTOL = 1e-9
"""Relative tolerance under which two iteration times are equal (see the module docstring)."""

K = TypeVar("K", bound=Hashable)


def same_time(a: float, b: float, rtol: float = RTOL) -> bool:
    """Whether ``a`` and ``b`` (seconds) are the same time: ``|a - b| <= rtol * max(|a|, |b|)``.
    NaN equals nothing; an infinity equals only itself."""
    if a == b:
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def faster(a: float, b: float, rtol: float = RTOL) -> bool:
    """Whether ``a`` is faster than ``b`` by more than the tolerance (a tie is not faster)."""
    return a < b and not same_time(a, b, rtol)


def tied_min(values: Iterable[float], rtol: float = RTOL) -> list[int]:
    """The positions, in order, of the values that tie with the smallest one (NaN skipped).
    Empty when there is no number."""
    vals = [float(v) for v in values]
    finite = [v for v in vals if not math.isnan(v)]
    if not finite:
        return []
    low = min(finite)
    return [i for i, v in enumerate(vals) if not math.isnan(v) and same_time(v, low, rtol)]


def first_min(values: Sequence[float], rtol: float = RTOL) -> int:
    """The position of the fastest value; ties go to the first in the given order."""
    tied = tied_min(values, rtol)
    if not tied:
        raise ValueError("no candidate has a time to compare (empty or all NaN)")
    return tied[0]


def tied_labels(scores: Mapping[K, float], rtol: float = RTOL) -> list[K]:
    """The keys of ``scores`` that tie for the smallest value, in the mapping's order."""
    keys = list(scores)
    return [keys[i] for i in tied_min(scores.values(), rtol)]


def fastest_label(scores: Mapping[K, float], rtol: float = RTOL) -> K:
    """The first key, in the mapping's order, of the tied fastest set."""
    keys = list(scores)
    return keys[first_min(list(scores.values()), rtol)]


def tied_ranks(values: Sequence[float], rtol: float = RTOL) -> list[int]:
    """Competition ranks (1 = fastest) in which tied values share a rank: each value's rank
    is one plus the number of values faster than it (:func:`faster`). NaN ranks last."""
    vals = [float(v) for v in values]
    nums = [v for v in vals if not math.isnan(v)]
    return [len(nums) + 1 if math.isnan(v) else 1 + sum(faster(o, v, rtol) for o in nums)
            for v in vals]


def fastest_label_by(scores: Mapping[K, float], secondary: Mapping[K, float],
                     rtol: float = RTOL) -> K:
    """The key of the tied fastest set with the smallest ``secondary`` value (a cost the
    score does not see, e.g. collectives launched), then the first in the mapping's order."""
    tied = tied_labels(scores, rtol)
    if not tied:
        raise ValueError("no candidate has a time to compare (empty or all NaN)")
    return min(tied, key=lambda k: (secondary[k], tied.index(k)))


def better(key: tuple[float, ...], incumbent: tuple[float, ...]) -> bool:
    """Whether a candidate's ``(seconds, tie-breaks...)`` beats the incumbent's: faster by
    more than :data:`RTOL`, or the same time (:func:`same_time`) and smaller tie-breaks;
    equal keys keep the incumbent (the enumeration order). The rule of the sharded solvers
    (:mod:`gradsched.experiments.sharded`)."""
    if same_time(key[0], incumbent[0]):
        return key[1:] < incumbent[1:]
    return key[0] < incumbent[0]
