"""The sharded solvers under a mixed-precision policy
(:class:`gradsched.collective_dtypes.CollectiveDtypes`): the problem they search, and the
plans they return with the policy attached.

The solvers (:mod:`gradsched.experiments.sharded.optimum` and its programs) price one size
per run of blocks for both collectives and both memories. Under a policy they search the
*view* of the problem (:func:`search_view`): a trace whose ``bytes`` are each tensor's
all-gather bytes (:func:`gradsched.replay.sharded_dtypes.layer_bytes`), priced by a comm
model that scales every reduce-scatter by the ratio of reduce-scatter to all-gather bytes
(:class:`ReduceScaled`). With a policy of one parameter dtype and one reduce dtype (no
float8) the ratio is the same for every tensor, so the view's collective times are exact;
with float8 all-gathers it is the whole model's ratio (the plan's ``info`` says so). The
view counts unsharded gradients at the all-gather bytes, not at the larger of the
parameter and reduce dtypes; the plan found is therefore replayed again on the problem
itself, policy attached (:meth:`ShardedProblem.replay`), and that replay's time and peak
are the ones reported. Where that peak exceeds the memory cap, the view's cap is lowered by
the ratio of the two peaks and the search runs again (:func:`dtyped_optimum`, at most
:data:`MAX_TIGHTENINGS` times): the plan then fits, but the search was not exact in memory,
and its ``info`` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.costmodel.base import CommModel
from gradsched.experiments.sharded.common import no_fit
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded import ShardedReplay
from gradsched.replay.sharded_dtypes import is_float8_weight, layer_bytes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq


class ReduceScaled(CommModel):
    """``base`` with every reduce-scatter of ``m`` bytes priced as one of ``ratio x m``
    (its wire floor is ``base``'s, already applied)."""

    kind = "reduce-scaled"
    wire_floor_applies = False

    def __init__(self, base: CommModel, ratio: float) -> None:
        self.base = base
        self.ratio = float(ratio)

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        scale = self.ratio if collective == "reduce_scatter" else 1.0
        return self.base.times(collective, np.asarray(nbytes, dtype=float) * scale, world_size)

    def startup_s(self, collective: str, world_size: int) -> float:
        return self.base.startup_s(collective, world_size)

    def sustained_algbw_Bps(self, world_size: int) -> float:
        """The base rate, lowered by the ratio when reduce-scatters grow (a lower rate keeps
        every wire-floor bound a bound)."""
        return self.base.sustained_algbw_Bps(world_size) / max(1.0, self.ratio)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ratio": self.ratio, "base": self.base.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReduceScaled:
        """A search's view is never saved or loaded."""
        raise NotImplementedError("a reduce-scaled view is made by search_view, not loaded")


def view_trace(trace: ComputeTrace, seq: LayerSeq,
               dtypes: CollectiveDtypes) -> tuple[ComputeTrace, float]:
    """The trace whose ``bytes`` are each tensor's all-gather bytes, and the ratio of the
    reduce-scatter to the all-gather bytes over the model (module docstring); ``seq``: the
    trace's layers, as the problem derived them."""
    per_layer = layer_bytes(trace, seq, dtypes)
    frame = trace.frame
    numel = frame["numel"].to_numpy(dtype=float)
    element = np.divide(frame["bytes"].to_numpy(dtype=float), numel,
                        out=np.zeros_like(numel), where=numel > 0)
    gather = np.asarray([dtypes.gather_element(e) for e in element])
    if dtypes.float8_all_gather:
        gather = np.where([is_float8_weight(n) for n in frame["name"]], 1.0, gather)
    view = ComputeTrace(frame=frame.assign(bytes=(numel * gather).astype(np.int64)),
                        meta=dict(trace.meta), path=trace.path)
    total = float(per_layer.gather.sum())
    return view, float(per_layer.reduce.sum()) / total if total > 0 else 1.0


def search_view(problem: Any) -> Any:
    """The problem the solvers search (module docstring): its trace and comm model the
    view's, no policy."""
    dtypes = problem.mixed_precision
    trace, ratio = view_trace(problem.trace, problem.seq, dtypes)
    return replace(problem, trace=trace, model=ReduceScaled(problem.model, ratio),
                   mixed_precision=None)


def with_policy(plan: ShardedPlan, dtypes: CollectiveDtypes | None) -> ShardedPlan:
    """``plan`` carrying the policy ``dtypes`` (the plan's own when it has one)."""
    if dtypes is None or plan.mixed_precision is not None:
        return plan
    return replace(plan, mixed_precision=dtypes)


MAX_TIGHTENINGS = 8
"""Searches of the view with a lowered cap before no fit is declared (module docstring)."""


def dtyped_optimum(problem: Any, solve: Callable[[Any], ShardedPlan]
                   ) -> tuple[ShardedPlan, ShardedReplay]:
    """The optimum of ``problem`` under its policy: ``solve`` (the optimum's search) on the
    view, the plan replayed on the problem, the view's cap lowered while the exact peak
    exceeds the problem's cap (module docstring)."""
    dtypes, cap = problem.mixed_precision, problem.memory_cap_bytes
    view = search_view(problem)
    for tightened in range(MAX_TIGHTENINGS + 1):
        found = solve(view)
        note = search_note(dtypes, tightened)
        plan = replace(found, mixed_precision=dtypes, info={**found.info, **note})
        result = problem.replay(plan)
        peak = result.gathered_peak_bytes
        if cap is None or peak <= cap * (1 + 1e-12):
            return plan, result
        view = replace(view, memory_cap_bytes=view.memory_cap_bytes * cap / peak)
    raise no_fit(cap, peak)


def search_note(dtypes: CollectiveDtypes, tightened: int = 0) -> dict[str, Any]:
    """What the plan's ``info`` says about a search under ``dtypes``."""
    note = {"mixed_precision_search": "priced on the all-gather bytes, reduce-scatters "
            "scaled by one ratio" + (" (float8: the model's ratio, approximate)"
                                     if dtypes.float8_all_gather else " (exact)")
            + "; time and peak from the exact replay"}
    if tightened:
        note["mixed_precision_cap_tightened"] = tightened
        note["exact"] = False
        note["method"] = ("a search of the all-gather-bytes view with its memory cap lowered "
                          f"{tightened} times until the exact peak fits")
    return note
