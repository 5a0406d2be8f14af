"""The percentile bootstrap of a ratio of medians (Efron & Tibshirani 1993, ch. 13): the
measured speed-ups of ``advise --validate`` and of the sharded re-execution."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradsched.errors import ConfigError

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def bootstrap_ratio(numerator: Sequence[float], denominator: Sequence[float], *,
                    resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = 0.95,
                    seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) and its percentile bootstrap interval
    (each sample resampled with replacement, independently; Efron & Tibshirani 1993,
    ch. 13). Deterministic for a given ``seed``."""
    a = np.asarray(numerator, dtype=float)
    b = np.asarray(denominator, dtype=float)
    if a.size < 2 or b.size < 2:
        raise ConfigError("the bootstrap needs at least 2 timed iterations per side")
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, size=(resamples, a.size))
    ib = rng.integers(0, b.size, size=(resamples, b.size))
    ratios = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(np.median(a) / np.median(b)), float(low), float(high)
