"""Gradient compression in the replay: one plan replayed with the plain and with the
compressed comm model (:class:`gradsched.compression.pricing.CompressedCommModel`)."""

from __future__ import annotations

import math
from typing import Any

from gradsched.compression.base import Compressor
from gradsched.compression.pricing import CompressedCommModel, ComputeCost
from gradsched.costmodel.base import CommModel
from gradsched.replay.engine import replay


def compressed_replay(trace: Any, plan: Any, base: CommModel, compressor: Compressor,
                      world_size: int, compute: ComputeCost | None = None,
                      options: Any = None) -> dict[str, Any]:
    """Replay ``plan`` with the plain and with the compressed model; both results and the
    predicted speed-up (plain / compressed iteration time)."""
    plain = replay(trace, plan, base, world_size, options)
    comp = replay(trace, plan, CompressedCommModel(base, compressor, compute), world_size,
                  options)
    return {"dense": plain, "compressed": comp,
            "speedup": plain.iteration_s / comp.iteration_s if comp.iteration_s > 0
            else math.nan}
