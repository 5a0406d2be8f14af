"""Gradient compression for data-parallel training, per bucket (flat gradient buffer).

* :mod:`~gradsched.compression.dense` -- all-reduce, the baseline;
* :mod:`~gradsched.compression.topk` -- top-k with residual accumulation and momentum
  correction, exchanged by all-gather (Lin et al., "Deep Gradient Compression", ICLR 2018);
* :mod:`~gradsched.compression.importance` -- importance-weighted pruning ``|g|/|w|`` with a
  random root broadcasting its index set and a ring all-reduce of the selected values
  (Cheng & Xu, "Bandwidth Reduction using Importance Weighted Pruning on Ring AllReduce",
  2019; they report 64x compression on AlexNet and 58.8x on ResNet-50 keeping accuracy);
* :mod:`~gradsched.compression.gtopk` -- global top-k by pairwise merging (Shi et al.,
  ICDCS 2019);
* :mod:`~gradsched.compression.pricing` -- pricing compression in the replay (a comm model);
* :mod:`~gradsched.compression.profile` -- timing the compressors' own computation;
* :mod:`~gradsched.compression.train` -- the real data-parallel training experiment.

:func:`make_compressor` builds one by name; the interface is
:class:`~gradsched.compression.base.Compressor`.
"""

from __future__ import annotations

from typing import Any

from gradsched.compression.base import (
    DENSITIES,
    BucketState,
    Comm,
    Compressor,
    DistComm,
    LocalComm,
    Message,
    parse_density,
    step_root,
)
from gradsched.compression.dense import DenseCompressor
from gradsched.compression.gtopk import GTopKCompressor
from gradsched.compression.importance import ImportanceCompressor
from gradsched.compression.topk import TopKCompressor
from gradsched.errors import ConfigError

COMPRESSORS: dict[str, type[Compressor]] = {
    cls.name: cls
    for cls in (DenseCompressor, TopKCompressor, ImportanceCompressor, GTopKCompressor)
}


def make_compressor(method: str, density: float | str = 1.0, momentum: float = 0.0,
                    seed: int = 0, **kwargs: Any) -> Compressor:
    """A compressor by registry name (``dense``, ``topk``, ``importance``, ``gtopk``)."""
    if method not in COMPRESSORS:
        raise ConfigError(f"unknown compressor {method!r}; known: {', '.join(COMPRESSORS)}")
    return COMPRESSORS[method](parse_density(density), momentum, seed, **kwargs)


__all__ = [
    "COMPRESSORS", "DENSITIES", "BucketState", "Comm", "Compressor", "DenseCompressor",
    "DistComm", "GTopKCompressor", "ImportanceCompressor", "LocalComm", "Message",
    "TopKCompressor", "make_compressor", "parse_density", "step_root",
]
