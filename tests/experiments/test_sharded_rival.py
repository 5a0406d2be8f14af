"""PyTorch's FSDP-unit MILP, reconstructed (:mod:`gradsched.experiments.sharded.rival_milp`),
and its comparison with the optimum (:mod:`gradsched.experiments.sharded.rival`), on a
SYNTHETIC trace: an embedding, three blocks of two linear layers, a head."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.rival import rival_rows
from gradsched.experiments.sharded.rival_milp import (
    NoMilpSolution,
    fsdp_milp,
    module_tree,
)
from gradsched.replay.sharded import replay_sharded
from gradsched.traces import ComputeTrace
from tests.replay.test_sharded import META

MB = 2**20


def _trace() -> ComputeTrace:
    names = ["emb.weight", *(f"blocks.{b}.fc{j}.weight" for b in range(3) for j in (1, 2)),
             "head.weight"]
    sizes = [8 * MB, *([4 * MB] * 6), 2 * MB]
    frame = pd.DataFrame({"name": names, "layer": range(len(names)),
                          "numel": [s // 4 for s in sizes], "bytes": sizes,
                          "forward_s": 0.002, "backward_s": 0.004, "update_s": 0.001,
                          "ready_order": list(range(len(names)))[::-1]})
    return ComputeTrace.from_frame(frame, META)


def test_the_module_tree_is_in_forward_pre_order() -> None:
    trace = _trace()
    mods = module_tree(trace, ShardedProblem(trace, AlphaBetaModel(1e-4, 1e-9), 4).seq)
    assert [m.fqn for m in mods[:4]] == ["", "emb", "blocks", "blocks.0"]
    assert mods[0].nbytes == 34 * MB
    assert next(m for m in mods if m.fqn == "blocks.1").nbytes == 8 * MB
    assert all(m.contiguous for m in mods)


def test_the_milp_picks_non_nested_units_that_replay() -> None:
    trace, model = _trace(), AlphaBetaModel(1e-4, 1e-9)
    result = fsdp_milp(ShardedProblem(trace, model, 4, memory_cap_bytes=None))
    assert result.status.startswith("optimal")
    owners = [{t.rsplit(".", 1)[0] for t in u.tensors} for u in result.plan.units]
    assert all(len(o) >= 1 for o in owners)
    replayed = replay_sharded(trace, result.plan, model, 4)
    assert replayed.iteration_s > 0


def test_latency_makes_the_milp_choose_fewer_units() -> None:
    """Each collective's latency is exposed at least once: with a large one, fewer and
    larger units (the physical trade-off the formulation prices)."""
    trace = _trace()
    cheap = fsdp_milp(ShardedProblem(trace, AlphaBetaModel(0.0, 1e-9), 4)).plan.n_units
    dear = fsdp_milp(ShardedProblem(trace, AlphaBetaModel(0.05, 1e-9), 4)).plan.n_units
    assert dear < cheap


def test_a_budget_below_any_layout_is_no_solution() -> None:
    with pytest.raises(NoMilpSolution, match="no solution"):
        fsdp_milp(ShardedProblem(_trace(), AlphaBetaModel(1e-4, 1e-9), 4, memory_cap_bytes=1.0))


def test_a_tighter_cap_bounds_the_milps_own_peak() -> None:
    trace, model = _trace(), AlphaBetaModel(1e-4, 1e-9)
    cap = 40 * MB
    result = fsdp_milp(ShardedProblem(trace, model, 4, memory_cap_bytes=cap))
    assert result.peak_bytes <= cap + 2 * 34 * MB / 4 + 1


def test_the_rows_put_the_three_plans_side_by_side() -> None:
    rows = rival_rows(_trace(), AlphaBetaModel(1e-4, 1e-9), 4, "streams", case="s",
                      network="n")
    assert [(r["cap"], r["algorithm"]) for r in rows] == [
        (cap, a) for cap in ("none", "fsdp2 peak")
        for a in ("fsdp2", "sharded-optimum", "fsdp-milp")]
    for row in rows:
        if row["algorithm"] == "sharded-optimum":
            assert row["step_over_optimum"] == 1.0 and row["fits_cap"]
        if row["algorithm"] == "fsdp-milp" and not math.isnan(row["step_s"]):
            assert row["milp_status"]
    capped = [r for r in rows if r["cap"] == "fsdp2 peak"]
    assert capped[0]["fits_cap"]  # fsdp2 fits its own peak
