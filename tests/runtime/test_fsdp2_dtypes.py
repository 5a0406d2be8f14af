"""Mixed precision run by stock FSDP2 on gloo: the collectives FSDP2 issues carry the
plan's dtypes and the bytes the sharded replay prices per unit, and the gradients it
reduces in bf16 match a single-process reference within bf16's precision.

The model and its trace are SYNTHETIC (a four-module net; trace times are made up), the
collectives real (two gloo ranks on this machine).
"""

from __future__ import annotations

import collections
import os
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import InputError
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import plan_layout
from gradsched.traces import ComputeTrace
from gradsched.traces.layers import layer_seq
from tests.replay.test_sharded import META

SHAPES = {"embed.weight": (16, 8), "embed.bias": (16,), "layers.0.weight": (16, 16),
          "layers.0.bias": (16,), "layers.1.weight": (16, 16), "layers.1.bias": (16,),
          "head.weight": (4, 16), "head.bias": (4,)}
"""Every dim 0 even: FSDP2 pads nothing on two ranks, so its buffers are the plan's bytes."""


def _net():  # type: ignore[no-untyped-def]
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(8, 16)
            self.layers = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])
            self.head = nn.Linear(16, 4)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = torch.relu(self.embed(x))
            for layer in self.layers:
                x = torch.relu(layer(x))
            return self.head(x)

    torch.manual_seed(0)
    return Net()


def synthetic_trace() -> ComputeTrace:
    """SYNTHETIC: the net's parameters as a float32 trace, one layer per module."""
    names = list(SHAPES)
    numel = [int(pd.Series(SHAPES[n]).prod()) for n in names]
    frame = pd.DataFrame({"name": names, "layer": [i // 2 for i in range(len(names))],
                          "numel": numel, "bytes": [4 * n for n in numel], "forward_s": 1e-3,
                          "backward_s": 2e-3, "update_s": 0.0,
                          "ready_order": list(range(len(names)))[::-1]})
    return ComputeTrace.from_frame(frame, META)


def _rank(rank: int, store: str, plans: list[dict], out: str) -> None:
    import torch
    import torch.distributed as dist

    from gradsched.plan_sharded import ShardedPlan
    from gradsched.runtime.collective_bytes import recorded_collectives
    from gradsched.runtime.fsdp2 import apply_plan

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    frames = []
    for index, plan_dict in enumerate(plans):
        reference = _net()
        model = _net()
        apply_plan(model, ShardedPlan.from_dict(plan_dict))
        torch.manual_seed(1)
        batch = torch.randn(4, 8)  # the same batch on both ranks: the mean gradient is its own
        with recorded_collectives() as seen:
            model(batch).float().square().mean().backward()
        reference(batch).square().mean().backward()
        error = max(float((p.grad.full_tensor().float() - reference.get_parameter(n).grad)
                          .abs().max() / reference.get_parameter(n).grad.abs().max())
                    for n, p in model.named_parameters())
        rows = [{"plan": index, "collective": s.collective, "dtype": s.dtype, "bytes": s.bytes}
                for s in seen]
        frames.append(pd.DataFrame(rows).assign(grad_rel_error=error))
    if rank == 0:
        pd.concat(frames).to_csv(out, index=False)
    dist.destroy_process_group()


def run_on_gloo(plans: list[dict], tmp_path: Path) -> pd.DataFrame:
    """What rank 0 saw for each plan, run one after another on two gloo ranks."""
    import torch.multiprocessing as mp

    out = tmp_path / "seen.csv"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_rank, args=(str(tmp_path / "store"), plans, str(out)), nprocs=2)
    return pd.read_csv(out)


POLICIES = (("bf16", "fp32"), ("bf16", None), ("fp16", "fp16"))
"""bf16 parameters with a float32 reduction (torchtitan's default), bf16 throughout (gloo's
bf16 reduce-scatter), fp16 throughout."""


@pytest.mark.slow
def test_fsdp2_moves_the_plans_dtypes_and_bytes_on_gloo(tmp_path: Path) -> None:
    trace = synthetic_trace()
    base = make_sharded_plan("torchtitan", trace, AlphaBetaModel(1e-4, 1e-9), 2)
    plans = [replace(base, mixed_precision=CollectiveDtypes(p, r)) for p, r in POLICIES]
    seen = run_on_gloo([p.to_dict() for p in plans], tmp_path)
    for index, ((param, reduce), plan) in enumerate(zip(POLICIES, plans, strict=True)):
        gather, scatter = plan_layout(trace, plan, layer_seq(trace)).sizes()
        mine = seen[seen["plan"] == index]
        by = {c: mine[mine["collective"] == c] for c in ("all_gather", "reduce_scatter")}
        assert set(by["all_gather"]["dtype"]) == {param}
        assert set(by["reduce_scatter"]["dtype"]) == {reduce or param}
        # one reduce-scatter per unit (the root holds nothing here), each of the plan's bytes
        assert collections.Counter(by["reduce_scatter"]["bytes"]) == \
            collections.Counter(int(b) for b in scatter if b > 0)
        assert set(by["all_gather"]["bytes"]) == {int(b) for b in gather if b > 0}
        numel = [144, 272, 272, 68]  # embed, layers.0, layers.1, head
        assert list(gather[:-1]) == [2 * n for n in numel]
        assert list(scatter[:-1]) == [(4 if reduce == "fp32" else 2) * n for n in numel]
        assert mine["grad_rel_error"].iloc[0] < 2e-2  # reduced correctly in its dtype


def test_the_runner_refuses_a_float8_all_gather() -> None:
    from gradsched.runtime.prelaunch import check_sharded_plan_covers_model

    trace = synthetic_trace()
    plan = make_sharded_plan("fsdp2", trace, AlphaBetaModel(1e-4, 1e-9), 2)
    plan = replace(plan, mixed_precision=CollectiveDtypes("bf16", "fp32", True))
    with pytest.raises(InputError, match="float8 all-gather"):
        check_sharded_plan_covers_model(plan, list(SHAPES), model="net", source="p.json")
