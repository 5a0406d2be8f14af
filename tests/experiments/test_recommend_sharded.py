"""The sharded recommendation's decision: the optimum only when faster than FSDP2's default
by more than the margin, and never on a tie (synthetic times, labelled)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gradsched.experiments.margin import Margin
from gradsched.experiments.recommend_sharded import ShardedAdvice

T = 0.30994  # seconds (synthetic)


def _advice(default_s: float, best_s: float, margin_pct: float) -> ShardedAdvice:
    return ShardedAdvice(default=None, default_replay=SimpleNamespace(iteration_s=default_s),
                         best=None, best_replay=SimpleNamespace(iteration_s=best_s),
                         margin=Margin(margin_pct, "synthetic"), semantics="streams",
                         world_size=8, memory_cap_bytes=None, names=())


def test_a_one_ulp_gain_is_a_tie_even_with_no_margin() -> None:
    assert not _advice(T, float(np.nextafter(T, 0.0)), 0.0).recommend_best
    assert _advice(T, T * 0.9, 0.0).recommend_best
    assert not _advice(T, T * 0.9, 20.0).recommend_best
