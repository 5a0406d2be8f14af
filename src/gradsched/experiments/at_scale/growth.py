"""Error, the perfect-scaling baseline, and the share of the published growth a prediction
explains, for the points of one group (calibrated on its smallest GPU count ``P0``).

Per point at ``P`` GPUs, with ``tokens`` the tokens one GPU processes per step:

* error = predicted / published - 1;
* **perfect scaling**: throughput per GPU as published at ``P0``, so the step is
  ``tokens x step(P0) / tokens(P0)``; its error is perfect / published - 1;
* **growth** of the time per token from ``P0`` to ``P``: ``g = step / perfect - 1`` (the
  step-time growth when the work per GPU is the same at both counts; the loss of
  throughput per GPU otherwise), published ``g_pub`` and predicted ``g_pred`` (the
  prediction at ``P0`` equals the published step there, by calibration);
* **growth explained** = ``g_pred / g_pub``, defined only where ``g_pub >= floor`` (the
  published throughput per GPU fell by at least ``floor``): below it the ratio divides by
  noise, and for a published gain (``g_pub < 0``) "explained" has no meaning. Such points
  are reported with their growths and no share.

Aggregates over the points with a share: the median of the shares, and the pooled share
``sum g_pred / sum g_pub`` (larger growths weigh more).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def growth(step_s: float, perfect_step_s: float) -> float:
    """Growth of the time per token over perfect scaling (fraction)."""
    return step_s / perfect_step_s - 1.0


def explained(published_growth: float, predicted_growth: float, floor: float) -> float:
    """``predicted / published`` growth, or NaN where the published growth is below
    ``floor`` (module docstring)."""
    if not published_growth >= floor:
        return math.nan
    return predicted_growth / published_growth


def pooled(pairs: Iterable[tuple[float, float]], floor: float) -> float:
    """``sum predicted / sum published`` over the (published, predicted) growths whose
    published growth reaches ``floor``; NaN if none does."""
    kept = [(pub, pred) for pub, pred in pairs if pub >= floor]
    if not kept:
        return math.nan
    return float(sum(pred for _, pred in kept) / sum(pub for pub, _ in kept))


def median(values: Iterable[float]) -> float:
    """Median of the finite values; NaN if none."""
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan
