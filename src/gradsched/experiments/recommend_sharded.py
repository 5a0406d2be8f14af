"""The recommending half of ``gradsched advise --sharded``: which FSDP2 layout to run.

FSDP2 as users write it (:func:`gradsched.planners.sharded.fsdp2`: one unit per block,
resharded, one unit prefetched each way) is the baseline. The exact optimum of
:mod:`gradsched.experiments.sharded.optimum` (unit grouping, resharding and prefetch depths, under
the memory cap if one is given) is recommended only when its predicted gain,
``100 * (t_default / t_optimum - 1)``, exceeds the comm model's own error (the margin of
:func:`gradsched.experiments.recommend.model_margin` over all-gather and reduce-scatter);
otherwise: keep FSDP2's defaults. Both plans are replayed in the semantics of the hardware
(``streams`` on a GPU, ``blocking`` for FSDP2 on CPU with gloo) with their memory peak of
gathered parameters and unsharded gradients. A memory cap that FSDP2's own default exceeds
is said; one that no plan meets is an error naming the smallest peak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain_notes import domain_notes
from gradsched.experiments.recommend import Margin, model_margin
from gradsched.experiments.sharded.common import NoLayoutFits, ShardedProblem
from gradsched.experiments.sharded.memory import MemoryBudget, memory_budget
from gradsched.experiments.sharded.optimum import Scored, optimum
from gradsched.plan_sharded import ShardedPlan, fully_shard_code
from gradsched.planners.sharded import fsdp2
from gradsched.replay.sharded import (
    Semantics,
    ShardedReplay,
    replay_sharded,
    sharded_range_shares,
)
from gradsched.ties import faster
from gradsched.traces.bundle import ComputeTrace

MIB = 2**20


@dataclass(frozen=True)
class ShardedAdvice:
    """FSDP2's default layout and the optimum, predicted, and the decision."""

    default: ShardedPlan
    default_replay: ShardedReplay
    best: ShardedPlan
    best_replay: ShardedReplay
    margin: Margin
    semantics: str
    world_size: int
    memory_cap_bytes: float | None
    names: tuple[str, ...]
    notes: tuple[str, ...] = ()
    """Where the prediction lies outside what the comm model measured
    (:func:`gradsched.experiments.recommend.domain_notes`)."""
    smallest_peak_bytes: float | None = None
    """Set when no layout of whole blocks fits the memory cap: the least peak any reached
    (``best`` is then FSDP2's default, shown for reference)."""

    @property
    def gain_pct(self) -> float:
        return 100.0 * (self.default_replay.iteration_s / self.best_replay.iteration_s - 1.0)

    @property
    def default_fits(self) -> bool:
        """Whether FSDP2's default layout fits the memory cap (always, without one)."""
        return (self.memory_cap_bytes is None
                or self.default_replay.gathered_peak_bytes <= self.memory_cap_bytes)

    @property
    def recommend_best(self) -> bool:
        """The optimum, when FSDP2's default does not fit the memory cap, or when it is
        faster than the default by more than the margin (never on a tie,
        :func:`gradsched.ties.faster`, whatever the margin)."""
        if self.smallest_peak_bytes is not None:
            return False
        return not self.default_fits or (
            faster(self.best_replay.iteration_s, self.default_replay.iteration_s)
            and self.gain_pct > self.margin.pct)

    @property
    def chosen(self) -> ShardedPlan:
        return self.best if self.recommend_best else self.default

    def to_dict(self) -> dict[str, Any]:
        return {"semantics": self.semantics, "world_size": self.world_size,
                "memory_cap_bytes": self.memory_cap_bytes,
                "margin_pct": self.margin.pct, "margin_source": self.margin.source,
                "band_known": self.margin.band_known, "gain_pct": self.gain_pct,
                "recommendation": ("none-fits" if self.smallest_peak_bytes is not None
                                   else "optimum" if self.recommend_best
                                   else "keep-fsdp2-default"),
                "smallest_peak_bytes": self.smallest_peak_bytes,
                "notes": list(self.notes),
                "default": {"plan": self.default.to_dict(),
                            "replay": self.default_replay.to_dict()},
                "optimum": {"plan": self.best.to_dict(), "replay": self.best_replay.to_dict()}}


def advise_sharded(trace: ComputeTrace, model: CommModel, world_size: int, *,
                   comm_spec: str, semantics: Semantics,
                   memory_cap_bytes: float | None = None,
                   margin_pct: float | None = None,
                   gpu_memory_bytes: float | None = None,
                   grad_accum: int = 1, compute_slowdown: float = 1.0) -> ShardedAdvice:
    """FSDP2's default and the optimum, replayed for one optimizer step of ``grad_accum``
    micro-batches (:mod:`gradsched.replay.sharded`), and the margin (module docstring). The
    optimum never gathers more than the GPU's memory leaves
    (:func:`gradsched.experiments.sharded.memory.memory_budget`: ``gpu_memory_bytes``, or
    the trace's device) nor more than ``memory_cap_bytes``. Both are replayed, and the optimum
    searched, with compute at ``1/compute_slowdown`` while a collective runs."""
    budget = memory_budget(trace, world_size, gpu_memory_bytes)
    cap = memory_cap_bytes
    if budget is not None:
        cap = budget.gathered_cap_bytes if cap is None else min(cap, budget.gathered_cap_bytes)
    default = fsdp2(trace, model, world_size)
    default_replay = replay_sharded(trace, default, model, world_size, semantics=semantics,
                                    grad_accum=grad_accum, compute_slowdown=compute_slowdown)
    smallest = None
    try:
        best = optimum(ShardedProblem(trace, model, world_size, semantics=semantics,
                                      memory_cap_bytes=cap, grad_accum=grad_accum,
                                      compute_slowdown=compute_slowdown))
    except NoLayoutFits as exc:  # said in the advice, with FSDP2's default for reference
        best, smallest = Scored(default, default_replay), exc.smallest_peak_bytes
    margin = model_margin(model, comm_spec, ("all_gather", "reduce_scatter"), margin_pct,
                          world_size)
    accum = [] if grad_accum == 1 else [
        f"times are per optimizer step of {grad_accum} micro-batches (gradient sync off "
        "for the first ones: every micro-batch all-gathers, the last reduce-scatters; the "
        "unsharded gradients are held across micro-batches)"]
    notes = accum + memory_notes(budget, semantics) + search_notes(best.plan) + sharded_notes(
        trace, model, world_size, comm_spec, (("FSDP2 default", default), ("optimum", best.plan)))
    return ShardedAdvice(default, default_replay, best.plan, best.replay, margin, semantics,
                         world_size, cap, tuple(trace.names), tuple(notes), smallest)


def sharded_notes(trace: ComputeTrace, model: CommModel, world_size: int, comm_spec: str,
                  layouts: Sequence[tuple[str, ShardedPlan]]) -> list[str]:
    """The domain notes of sharded layouts (:func:`gradsched.costmodel.domain_notes.
    domain_notes`): out-of-range shares per layout; extrapolated world size, derived
    all-gather/reduce-scatter, contradicting sweeps. ``advise --sharded`` and ``shard
    compare`` print the same."""
    return domain_notes(
        model, world_size, comm_spec,
        [(f"the {label} layout", sharded_range_shares(trace, plan, model, world_size))
         for label, plan in layouts], ("all_gather", "reduce_scatter"))


def memory_notes(budget: MemoryBudget | None, semantics: str) -> list[str]:
    """What the memory cap rests on, or that no GPU memory was known."""
    if budget is not None:
        return [f"memory: {budget.text()}"]
    if semantics == "blocking":
        return []
    return ["memory: the trace names no GPU whose memory is known; give --gpu-memory (e.g. "
            "80G) so that no layout gathers more than the GPU holds"]


def search_notes(plan: ShardedPlan) -> list[str]:
    """That a search stood in for part of the optimum, and how far from the bound it is."""
    info = plan.info
    if info.get("exact") is not False:
        return []
    return [f"the optimum is {info['method']}: within {info['gap_to_bound_pct']:.3g} % of "
            f"the lower bound ({info['lower_bound_s']:.4g} s), not proven optimal"]


def _row(label: str, plan: ShardedPlan, result: ShardedReplay) -> str:
    return (f"  {label:<28} {result.iteration_s:8.3g} s  {plan.n_units:3d} units + root, "
            f"prefetch {plan.forward_prefetch}/{plan.backward_prefetch}, reshard "
            f"{'yes' if all(u.reshard_after_forward for u in plan.units) else 'no'}, peak "
            f"{result.gathered_peak_bytes / MIB:.4g} MiB")


def render_sharded(adv: ShardedAdvice) -> str:
    """The advice as text, with the ``fully_shard`` calls to paste."""
    lines = [f"gradsched advise --sharded: {adv.world_size} ranks, {adv.semantics} "
             "collectives; predicted iteration time (replay) and peak of gathered parameters "
             "and unsharded gradients per rank:",
             _row("FSDP2 default (per block)", adv.default, adv.default_replay)]
    if adv.smallest_peak_bytes is None:  # else no layout fits: there is no optimum to show
        lines.append(_row("optimum", adv.best, adv.best_replay))
    if adv.memory_cap_bytes is not None:
        lines.append(f"  memory cap: {adv.memory_cap_bytes / MIB:.4g} MiB"
                     + ("" if adv.default_fits else " (FSDP2's default exceeds it)"))
    band = (adv.gain_pct - adv.margin.pct, adv.gain_pct + adv.margin.pct)
    if adv.smallest_peak_bytes is None and not adv.margin.band_known:
        lines.append(f"gain of the optimum: {adv.gain_pct:+.3g} % (band unknown); "
                     f"{adv.margin.source}")
    elif adv.smallest_peak_bytes is None:
        lines.append(f"gain of the optimum: {adv.gain_pct:+.3g} % (band {band[0]:+.3g} to "
                     f"{band[1]:+.3g} %: the model's error band, not a confidence interval); "
                     f"margin {adv.margin.pct:g} % ({adv.margin.source})")
    if adv.smallest_peak_bytes is not None:
        lines.append(f"RECOMMENDATION: no layout of whole blocks fits: the smallest peak found "
                     f"is {adv.smallest_peak_bytes / MIB:.4g} MiB against the cap of "
                     f"{adv.memory_cap_bytes / MIB:.4g} MiB. Shard below the block (a "
                     "fully_shard per sub-module, e.g. per expert), or add tensor or expert "
                     "parallelism; FSDP2's per-block layout, for reference:")
    elif adv.recommend_best and not adv.default_fits:
        lines.append("RECOMMENDATION: this layout, which fits the memory cap where FSDP2's "
                     "default does not (replace your fully_shard calls):")
    elif adv.recommend_best:
        lines.append("RECOMMENDATION: this layout (replace your fully_shard calls):")
    else:
        lines.append("RECOMMENDATION: keep FSDP2's defaults (one fully_shard per block); "
                     "nothing is predicted faster by more than the margin. The layout:")
    lines.append(fully_shard_code(adv.chosen, adv.names))
    lines += [f"note: {n}" for n in adv.notes]
    return "\n".join(lines) + "\n"
