"""Block partition and rank folding of the point-to-point collectives."""

from __future__ import annotations

import itertools

from gradsched.collectives.common import block_bounds, fold_rank, unfold_rank


def test_partition_and_folding() -> None:
    for n in (0, 1, 5, 7, 100):
        for k in (1, 2, 3, 4, 5, 8):
            bounds = block_bounds(n, k)
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(b[1] == c[0] for b, c in itertools.pairwise(bounds))
            sizes = [b - a for a, b in bounds]
            assert max(sizes) - min(sizes) <= 1
    for p in range(1, 12):
        active = [fold_rank(r, p) for r in range(p)]
        pof2 = active[0][1]
        news = sorted(n for n, _, _ in active if n >= 0)
        assert news == list(range(pof2))
        for r, (new, _, rem) in enumerate(active):
            if new >= 0:
                assert unfold_rank(new, rem) == r
