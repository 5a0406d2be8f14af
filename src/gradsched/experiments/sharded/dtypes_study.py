"""The collectives' dtypes and the published layouts, side by side: each mixed-precision
policy of :data:`POLICIES` with each layout of :data:`LAYOUTS`, replayed on one case
(:class:`gradsched.experiments.sharded.common.ShardedProblem`, its policy replaced).

Policies (the trace's own dtype is bf16 for the LLM traces of ``gradsched traces flops``):
``bf16`` (FSDP2's default on a bf16 model: every collective in bf16), ``bf16/fp32`` (bf16
all-gathers, float32 reduce-scatters: torchtitan's default,
``--training.mixed_precision_reduce float32``), ``bf16/fp32+fp8`` (the same with torchao's
float8 all-gather of the blocks' linear weights). Layouts: FSDP2's per-block default and
torchtitan's two (:mod:`gradsched.planners.sharded.torchtitan`).

Per row: the replayed step, its exposed communication, the collectives' busy time, the
peak of gathered parameters and unsharded gradients, and the bytes one step all-gathers and
reduce-scatters (each collective's full, unsharded buffer, summed over one step of one
micro-batch: a unit resharded after forward is all-gathered twice), with the comm model's
world-size basis (measured or extrapolated).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import plan_layout

POLICIES: dict[str, CollectiveDtypes | None] = {
    "bf16": None,
    "bf16/fp32": CollectiveDtypes("bf16", "fp32"),
    "bf16/fp32+fp8": CollectiveDtypes("bf16", "fp32", float8_all_gather=True),
}
FLOAT8_GPUS = ("h100", "h100-nvl", "h100-pcie", "h200", "gh200")
"""GPUs of the traces whose float8 rows are replayed: torchao's float8 training needs float8
matmuls (``torch._scaled_mm``: compute capability 8.9 or later, Ada and Hopper); an A100
(8.0) has none, so its traces get no float8 rows."""
LAYOUTS = ("fsdp2", "torchtitan", "torchtitan-2024")
COLUMNS = ("case", "world_size", "policy", "layout", "n_units", "iteration_s",
           "exposed_comm_s", "comm_busy_s", "gathered_peak_bytes", "all_gather_bytes",
           "reduce_scatter_bytes", "world_size_basis")


def dtype_study(problem: ShardedProblem, case: str) -> list[dict[str, Any]]:
    """One row per policy and layout (module docstring) of ``problem`` (its own policy is
    replaced by each of :data:`POLICIES`; the float8 one only on :data:`FLOAT8_GPUS`)."""
    rows = []
    gpu = str(problem.trace.meta.get("device", "")).split(" ", 1)[0]
    for label, dtypes in POLICIES.items():
        if dtypes is not None and dtypes.float8_all_gather and gpu not in FLOAT8_GPUS:
            continue  # no float8 matmuls on this GPU (FLOAT8_GPUS)
        p = replace(problem, mixed_precision=dtypes)
        for name in LAYOUTS:
            plan = replace(make_sharded_plan(name, p.trace, p.model, p.world_size),
                           mixed_precision=dtypes)
            result = p.replay(plan)
            gather, reduce = plan_layout(p.trace, plan, p.seq).sizes()
            ag = sum(float(g) * (2 if u.reshard_after_forward else 1)
                     for g, u in zip(gather[:-1], plan.units, strict=True)) + float(gather[-1])
            rows.append({"case": case, "world_size": p.world_size, "policy": label,
                         "layout": name, "n_units": plan.n_units,
                         "iteration_s": result.iteration_s,
                         "exposed_comm_s": result.exposed_comm_s,
                         "comm_busy_s": result.comm_busy_s,
                         "gathered_peak_bytes": result.gathered_peak_bytes,
                         "all_gather_bytes": ag,
                         "reduce_scatter_bytes": float(reduce.sum()),
                         "world_size_basis": p.model.world_size_basis(p.world_size)})
    return rows
