"""Identifying the inter-node level from a sweep: a synthetic 2 x 8 sweep generated from known
levels gives them back."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel import AlphaBetaModel, Topology
from gradsched.errors import ConfigError
from tests.costmodel.test_topology import A_INTRA, B_INTRA


@pytest.mark.parametrize("kind", ["hierarchical", "flat"])
def test_identify_inter_level_recovers_synthetic_parameters(kind: str) -> None:
    from gradsched.costmodel.formulas import AnalyticModel
    from gradsched.costmodel.topology_fit import identify_inter_level

    # synthetic: a 2 x 8 sweep generated from known levels must give back the inter level
    intra = AlphaBetaModel(A_INTRA, B_INTRA)
    truth = AnalyticModel(8e-6, 3e-10, 0.0, "ring")
    sizes = np.geomspace(4, 2**25, 24)
    sweep = Topology(2, 8, intra, truth).collective_model(kind).times("all_reduce", sizes, 16)
    got = identify_inter_level(intra, sizes, sweep, 2, 8, kind)
    assert got.alpha == pytest.approx(truth.alpha, rel=1e-6)
    assert got.beta == pytest.approx(truth.beta, rel=1e-6)
    with pytest.raises(ConfigError, match=">= 2 nodes"):
        identify_inter_level(intra, sizes, sweep, 1, 16, kind)
