"""ZeRO-1 for real: 2 gloo ranks, the zoo's tiny-mlp, a few SGD steps; DDP +
``ZeroRedundancyOptimizer`` (with and without ``overlap_with_ddp``) ends with the
parameters of plain DDP + the same optimizer (:mod:`gradsched.runtime.zero1`)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

STEPS = 3


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    return launch("gradsched.runtime.zero1:zero1_check", {"steps": STEPS},
                  LaunchSpec(2, op_timeout_s=30, deadline_s=120))


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(abs(x - y) for n in a for x, y in zip(a[n], b[n], strict=True))


@pytest.mark.parametrize(("mode", "reference"), [("zero", "ddp"),
                                                 ("zero_overlap", "ddp_warmup")])
def test_zero1_matches_ddp(ranks, mode, reference) -> None:
    for rank in ranks:
        assert _max_diff(rank[mode], rank[reference]) < 1e-6
    # the parameters moved, and every rank holds the same ones
    assert _max_diff(ranks[0][mode], ranks[0]["initial"]) > 1e-3
    assert _max_diff(ranks[0][mode], ranks[1][mode]) == 0.0
