"""The sharded optimum against PyTorch's FSDP-unit MILP (:mod:`.rival_milp`, a
reconstruction) and FSDP2's defaults, replayed side by side.

Per case and memory cap (none, and FSDP2's default plan's own predicted peak, the cap of
the re-execution's ``sharded-optimum-capped``, :func:`gradsched.reexec.sharded.capped_optimum`):
the three plans, each replayed by :func:`gradsched.replay.sharded.replay_sharded` in the
case's semantics, with the replay's step time and peak of gathered parameters and
unsharded gradients, whether that peak is within the cap, and the step time over the
optimum's. Both gaps are reported as they come: the optimum is exact only over its own
layouts (contiguous runs of whole blocks, :mod:`.optimum`); the MILP may choose modules
below the block, and its own objective and memory bound are its model's, not the replay's
(``milp_exposed_comm_s``, ``milp_peak_bytes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import OPTIMUM, optimum
from gradsched.experiments.sharded.rival_milp import RIVAL, NoMilpSolution, fsdp_milp
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import Semantics, replay_sharded
from gradsched.traces.bundle import ComputeTrace

BASELINE = "fsdp2"
NAN = float("nan")
CAPS = ("none", "fsdp2 peak")
"""The caps compared: none, and the baseline's predicted peak."""


def rival_rows(trace: ComputeTrace, model: CommModel, world_size: int,
               semantics: Semantics, *, case: str, network: str,
               plans: dict[str, ShardedPlan] | None = None) -> list[dict[str, Any]]:
    """The rows of one case (module docstring); ``plans`` gains ``<cap>/<algorithm>``."""
    base = make_sharded_plan(BASELINE, trace, model, world_size)
    base_peak = replay_sharded(trace, base, model, world_size,
                               semantics=semantics).gathered_peak_bytes
    rows: list[dict[str, Any]] = []
    for cap_name in CAPS:
        cap = None if cap_name == "none" else base_peak
        problem = ShardedProblem(trace, model, world_size, semantics=semantics,
                                 memory_cap_bytes=cap)
        best = optimum(problem).plan
        found: dict[str, ShardedPlan | None] = {BASELINE: base, OPTIMUM: best}
        try:
            milp = fsdp_milp(problem)
            found[RIVAL] = milp.plan
            own = {"milp_status": milp.status, "milp_exposed_comm_s": milp.exposed_comm_s,
                   "milp_peak_bytes": milp.peak_bytes}
        except NoMilpSolution as exc:  # its memory model admits no layout: a row says so
            found[RIVAL] = None
            own = {"milp_status": exc.status.lower(), "milp_exposed_comm_s": NAN,
                   "milp_peak_bytes": NAN}
        reference = replay_sharded(trace, best, model, world_size,
                                   semantics=semantics).iteration_s
        for name, plan in found.items():
            rows.append({"case": case, "network": network, "world_size": world_size,
                         "semantics": semantics, "cap": cap_name,
                         "cap_bytes": NAN if cap is None else cap, "algorithm": name,
                         **_replayed(trace, plan, model, world_size, semantics, cap, reference),
                         **(own if name == RIVAL else dict.fromkeys(own, NAN))})
            if plans is not None and plan is not None:
                plans[f"{cap_name.replace(' ', '-')}/{name}"] = plan
    return rows


def _replayed(trace: ComputeTrace, plan: ShardedPlan | None, model: CommModel,
              world_size: int, semantics: Semantics, cap: float | None,
              reference_s: float) -> dict[str, Any]:
    """A plan's replayed columns (NaN and no units when there is no plan)."""
    if plan is None:
        return {"n_units": 0, "forward_prefetch": 0, "backward_prefetch": 0, "step_s": NAN,
                "gathered_peak_bytes": NAN, "fits_cap": False, "step_over_optimum": NAN}
    result = replay_sharded(trace, plan, model, world_size, semantics=semantics)
    return {"n_units": plan.n_units, "forward_prefetch": plan.forward_prefetch,
            "backward_prefetch": plan.backward_prefetch, "step_s": result.iteration_s,
            "gathered_peak_bytes": result.gathered_peak_bytes,
            "fits_cap": True if cap is None else bool(result.gathered_peak_bytes <= cap),
            "step_over_optimum": result.iteration_s / reference_s}


def case_name(path: str | Path) -> str:
    """A trace's or sweep's file stem (the table's case and network labels)."""
    return Path(path).name.removesuffix(".csv")


def measured_rows(iterations: pd.DataFrame) -> list[dict[str, Any]]:
    """Per plan run (``gradsched shard run``'s CSV, plans ``plans/<cap>/<algorithm>.json``):
    the cap and algorithm from the plan's path, the median, p10 and p90 of its iterations,
    and the ratio of FSDP2's default median to its own (above 1: faster than FSDP2)."""
    rows = []
    for plan, group in iterations.groupby("plan", sort=False):
        times = group["iteration_s"].astype(float)
        parts = Path(str(plan)).parts
        rows.append({"plan": plan, "cap": parts[-2].replace("-", " ") if len(parts) > 1
                     else "none", "algorithm": str(group["algorithm"].iloc[0]),
                     "iters": int(times.size), "measured_s": float(times.median()),
                     "measured_p10_s": float(np.percentile(times, 10)),
                     "measured_p90_s": float(np.percentile(times, 90))})
    base = [r["measured_s"] for r in rows if r["algorithm"] == BASELINE]
    for row in rows:
        row["speedup_vs_fsdp2"] = base[0] / row["measured_s"] if base else NAN
    return rows
