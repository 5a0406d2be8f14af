"""A compressed comm model prices the compressed messages and the compression compute."""

from __future__ import annotations

import pytest

from gradsched.compression import (
    make_compressor,
)
from gradsched.compression.pricing import (
    CompressedCommModel,
    ComputeCost,
)
from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError


def test_compressed_model_prices_messages_and_compute() -> None:
    base = AlphaBetaModel(alpha=1e-4, beta=1e-9)
    comp = make_compressor("importance", "1/64")
    model = CompressedCommModel(base, comp, ComputeCost(2e-5, 3e-9))
    n = 64_000
    k = 1000
    want = (2e-5 + 3e-9 * n) + base.time("broadcast", 4 * k, 4) + base.time("all_reduce", 4 * k, 4)
    assert model.time("all_reduce", 4 * n, 4) == pytest.approx(want)
    topk = CompressedCommModel(base, make_compressor("topk", "1/64"))
    assert topk.time("all_reduce", 4 * n, 4) == pytest.approx(base.time("all_gather",
                                                                        4 * 8 * k, 4))
    with pytest.raises(ConfigError):
        model.time("reduce_scatter", 100, 4)
    again = CompressedCommModel.from_dict(model.to_dict())
    assert again.time("all_reduce", 4 * n, 4) == pytest.approx(want)
