"""The sharded solvers under a mixed-precision policy
(:class:`gradsched.collective_dtypes.CollectiveDtypes`): the problem they search, and the
plans they return with the policy attached.

The solvers (:mod:`gradsched.experiments.sharded.optimum` and its programs) price one size
per run of blocks for both collectives and both memories. Under a policy they search a
*view* of the problem (:func:`search_view`): a trace whose ``bytes`` are one width per
tensor, priced by a comm model that scales every all-gather and every reduce-scatter by the
ratio of its bytes to the view's (:class:`DtypeScaled`). Two widths
(:mod:`gradsched.replay.sharded_dtypes` gives the bytes):

* the all-gather bytes (*narrow*): the gathered parameters exact, the unsharded gradients
  counted at the all-gather bytes, which can be fewer than theirs: the view's peak is never
  above the exact one;
* the gradient bytes, ``numel x max(param, reduce)`` (*wide*): the gradients exact, the
  gathered parameters counted at the gradient bytes, never fewer than theirs: the view's
  peak is never below the exact one, so every plan it admits fits the cap.

With one parameter dtype and one reduce dtype (no float8) both ratios are the same for
every tensor, so either view's collective times are the problem's, exactly; with float8
all-gathers the all-gather ratio is the whole model's (approximate; the plan's ``info``
says so). Without a memory cap the narrow view's optimum is the problem's (exact without
float8). With a cap (:func:`dtyped_optimum`) both views are searched and each plan replayed
on the problem, policy attached (:meth:`ShardedProblem.replay`); the faster of those whose
exact peak fits the cap wins. The narrow view finding no layout under the cap proves that
none fits; when the narrow view's plan exceeds the cap and the wide view finds none, the
error names the narrow plan's exact peak (a layout between the two may still fit).
Reported times and peaks are always the exact replay's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from gradsched.collective_dtypes import FLOAT8_BYTES, CollectiveDtypes
from gradsched.costmodel.base import CommModel
from gradsched.experiments.sharded.common import NoLayoutFits, no_fit
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded import ShardedReplay
from gradsched.replay.sharded_dtypes import is_float8_weight, layer_bytes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq


class DtypeScaled(CommModel):
    """``base`` with every all-gather of ``m`` bytes priced as one of ``gather x m`` and
    every reduce-scatter as one of ``reduce x m`` (its wire floor is ``base``'s, already
    applied)."""

    kind = "dtype-scaled"
    wire_floor_applies = False

    def __init__(self, base: CommModel, gather: float, reduce: float) -> None:
        self.base = base
        self.scale = {"all_gather": float(gather), "reduce_scatter": float(reduce)}

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        scaled = np.asarray(nbytes, dtype=float) * self.scale.get(collective, 1.0)
        return self.base.times(collective, scaled, world_size)

    def startup_s(self, collective: str, world_size: int) -> float:
        return self.base.startup_s(collective, world_size)

    def sustained_algbw_Bps(self, world_size: int) -> float:
        """The base rate over the smaller ratio (a view byte moves at least that fast, so
        every wire-floor bound stays a bound)."""
        return self.base.sustained_algbw_Bps(world_size) / min(1.0, *self.scale.values())

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "scale": dict(self.scale), "base": self.base.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DtypeScaled:
        """A search's view is never saved or loaded."""
        raise NotImplementedError("a dtype-scaled view is made by search_view, not loaded")


def view_trace(trace: ComputeTrace, seq: LayerSeq, dtypes: CollectiveDtypes,
               wide: bool = False) -> tuple[ComputeTrace, float, float]:
    """The trace whose ``bytes`` are each tensor's all-gather bytes (``wide``: its
    unsharded-gradient bytes), and the ratios of the all-gather and reduce-scatter bytes to
    those over the model (module docstring); ``seq``: the trace's layers, as the problem
    derived them."""
    per_layer = layer_bytes(trace, seq, dtypes)
    frame = trace.frame
    names = frame["name"].tolist()
    numel = frame["numel"].to_numpy(dtype=float)
    element = np.divide(frame["bytes"].to_numpy(dtype=float), numel,
                        out=np.zeros_like(numel), where=numel > 0)
    width = np.asarray([max(dtypes.gather_element(e), dtypes.reduce_element(e)) if wide
                        else tensor_gather_element(name, e, dtypes)
                        for name, e in zip(names, element, strict=True)])
    view = ComputeTrace(frame=frame.assign(bytes=(numel * width).astype(np.int64)),
                        meta=dict(trace.meta), path=trace.path)
    total = float((numel * width).sum())
    if total <= 0:
        return view, 1.0, 1.0
    return view, float(per_layer.gather.sum()) / total, float(per_layer.reduce.sum()) / total


def tensor_gather_element(name: str, element: float, dtypes: CollectiveDtypes) -> float:
    """Bytes per element of tensor ``name``'s all-gather (a float8 weight: one)."""
    if dtypes.float8_all_gather and is_float8_weight(name):
        return float(FLOAT8_BYTES)
    return dtypes.gather_element(element)


def search_view(problem: Any, wide: bool = False) -> Any:
    """A problem the solvers search (module docstring): its trace and comm model the
    view's, no policy."""
    trace, gather, reduce = view_trace(problem.trace, problem.seq, problem.mixed_precision,
                                       wide)
    return replace(problem, trace=trace, model=DtypeScaled(problem.model, gather, reduce),
                   mixed_precision=None)


def dtyped_optimum(problem: Any, solve: Callable[[Any], ShardedPlan]
                   ) -> tuple[ShardedPlan, ShardedReplay]:
    """The optimum of ``problem`` under its policy: ``solve`` (the optimum's search) on the
    narrow view, and with a memory cap on the wide one too, each plan replayed on the
    problem (module docstring)."""
    dtypes, cap = problem.mixed_precision, problem.memory_cap_bytes
    found: list[tuple[float, float, ShardedPlan, ShardedReplay]] = []
    over = float("inf")
    for wide in (False, True) if cap is not None else (False,):
        try:
            plan = solve(search_view(problem, wide))
        except NoLayoutFits:
            if not wide:
                raise  # the narrow view never overstates a peak: nothing fits
            continue
        plan = replace(plan, mixed_precision=dtypes,
                       info={**plan.info, **search_note(dtypes, wide)})
        result = problem.replay(plan)
        if cap is not None and result.gathered_peak_bytes > cap * (1 + 1e-12):
            over = min(over, result.gathered_peak_bytes)
            continue
        found.append((result.iteration_s, result.gathered_peak_bytes, plan, result))
    if not found:
        raise no_fit(cap, over)
    best = min(found, key=lambda f: (f[0], f[1]))
    return best[2], best[3]


def search_note(dtypes: CollectiveDtypes, wide: bool = False) -> dict[str, Any]:
    """What the plan's ``info`` says about a search under ``dtypes``."""
    return {"mixed_precision_search": f"the {'wide' if wide else 'narrow'} view: collective "
            "times " + ("approximate (float8: one all-gather ratio for the model)"
                        if dtypes.float8_all_gather else "exact")
            + "; time and peak from the exact replay"}


def with_policy(plan: ShardedPlan, dtypes: CollectiveDtypes | None) -> ShardedPlan:
    """``plan`` carrying the policy ``dtypes`` (the plan's own when it has one)."""
    if dtypes is None or plan.mixed_precision is not None:
        return plan
    return replace(plan, mixed_precision=dtypes)
