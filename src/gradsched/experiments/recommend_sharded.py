"""The recommending half of ``gradsched advise --sharded``: which FSDP2 layout to run.

FSDP2 as users write it (:func:`gradsched.planners.sharded.fsdp2`: one unit per block,
resharded, one unit prefetched each way) is the baseline. The exact optimum of
:mod:`gradsched.experiments.sharded.optimum` (unit grouping, resharding and prefetch depths, under
the memory cap if one is given) is recommended only when its predicted gain,
``100 * (t_default / t_optimum - 1)``, exceeds the comm model's own error (the margin of
:func:`gradsched.experiments.margin.model_margin` over all-gather and reduce-scatter);
otherwise: keep FSDP2's defaults. Both plans are replayed in the semantics of the hardware
(``streams`` on a GPU, ``blocking`` for FSDP2 on CPU with gloo) with their memory peak of
gathered parameters and unsharded gradients. A memory cap that FSDP2's own default exceeds
is said; one that no plan meets is an error naming the smallest peak.

**Never without a memory check.** On GPU semantics (``streams``) with no GPU named (no
``--gpu-memory``, no known GPU in the trace's device), the GPU is assumed to be
:data:`gradsched.gpus.ASSUMED_GPU` (the H100 SXM 80GB), said in the notes, and its memory
caps every layout (with the trace's activations, :mod:`gradsched.experiments.sharded.memory`).
The lower bound quoted beside a searched optimum counts the cap: under a cap ``C`` no unit
gathers more than ``C``, so a step runs at least ``ceil(total / C)`` units, each paying its
all-gather's and reduce-scatter's start-up (:func:`capped_lower_bound_s`).

**Output a user pastes.** A layout of one unit per block with the same resharding and
prefetch is printed as a loop over the blocks (:func:`paste_code`); any other layout lists
its first units and points to ``--plan-out``, which prints the full listing. A gain within
the tie tolerance (:data:`gradsched.ties.RTOL`) is printed as a tie, never as float noise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain_notes import domain_notes
from gradsched.experiments.margin import Margin, model_margin
from gradsched.experiments.sharded.common import NoLayoutFits, ShardedProblem
from gradsched.experiments.sharded.dtypes import with_policy
from gradsched.experiments.sharded.memory import MemoryBudget, memory_budget
from gradsched.experiments.sharded.optimum import Scored, optimum
from gradsched.gpus import ASSUMED_GPU, GPU_MEMORY_BYTES, GPUS
from gradsched.plan_sharded import ShardedPlan, covering_modules, fully_shard_code, tensors_under
from gradsched.planners.sharded import fsdp2
from gradsched.planners.sharded.torchtitan import torchtitan
from gradsched.replay.sharded import (
    ShardedReplay,
    replay_sharded,
    sharded_range_shares,
)
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.ties import faster, same_time
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import layer_seq

MIB = 2**20
LISTED_UNITS = 3
"""Units of a non-uniform layout listed on stdout; ``--plan-out`` prints them all."""


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
    published: tuple[tuple[str, ShardedPlan, ShardedReplay], ...] = ()
    """Other layouts users run as published (torchtitan's), replayed beside the default:
    shown, compared with it, not recommended by this advice."""

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
                "gain_is_tie": bool(same_time(self.best_replay.iteration_s,
                                              self.default_replay.iteration_s)),
                "recommendation": ("none-fits" if self.smallest_peak_bytes is not None
                                   else "optimum" if self.recommend_best
                                   else "keep-fsdp2-default"),
                "smallest_peak_bytes": self.smallest_peak_bytes,
                "notes": list(self.notes),
                "default": {"plan": self.default.to_dict(),
                            "replay": self.default_replay.to_dict()},
                **{name: {"plan": plan.to_dict(), "replay": result.to_dict()}
                   for name, plan, result in self.published},
                "optimum": {"plan": self.best.to_dict(), "replay": self.best_replay.to_dict()}}


def advise_sharded(problem: ShardedProblem, comm_spec: str, margin_pct: float | None = None,
                   gpu_memory_bytes: float | None = None) -> ShardedAdvice:
    """FSDP2's default and the optimum of ``problem`` (its trace, comm model, world size,
    semantics, memory cap, micro-batches, slowdown and collective dtypes, built and checked
    once where the command parses its arguments), replayed for one optimizer step of
    ``problem.grad_accum`` micro-batches (:mod:`gradsched.replay.sharded`), and the margin
    (module docstring; ``margin_pct`` overrides the model's, ``comm_spec`` names it). The
    optimum never gathers more than the GPU's memory leaves
    (:func:`gradsched.experiments.sharded.memory.memory_budget`: ``gpu_memory_bytes``, or
    the trace's device) nor more than ``problem.memory_cap_bytes``. Both are replayed, and
    the optimum searched, with compute at ``1/problem.compute_slowdown`` while a collective
    runs. Every layout carries ``problem.mixed_precision`` (the collectives' dtypes) and is
    replayed with it; torchtitan's layout (:mod:`gradsched.planners.sharded.torchtitan`) is
    replayed beside FSDP2's default."""
    trace, model, world_size = problem.trace, problem.model, problem.world_size
    semantics, grad_accum = problem.semantics, problem.grad_accum
    compute_slowdown, mixed_precision = problem.compute_slowdown, problem.mixed_precision
    memory_cap_bytes = problem.memory_cap_bytes
    budget = memory_budget(trace, world_size, gpu_memory_bytes)
    if budget is None and semantics != "blocking":  # a GPU run: never without a memory check
        budget = memory_budget(trace, world_size, GPU_MEMORY_BYTES[ASSUMED_GPU],
                               source=f"ASSUMED: no GPU named, {ASSUMED_GPU} "
                                      f"({GPUS[ASSUMED_GPU].source.split(': ', 1)[1]}); "
                                      "give --gpu-memory for yours")
    cap = memory_cap_bytes
    if budget is not None:
        cap = budget.gathered_cap_bytes if cap is None else min(cap, budget.gathered_cap_bytes)
    default = with_policy(fsdp2(trace, model, world_size), mixed_precision)
    default_replay = replay_sharded(trace, default, model, world_size, semantics=semantics,
                                    grad_accum=grad_accum, compute_slowdown=compute_slowdown)
    titan = with_policy(torchtitan(trace, model, world_size), mixed_precision)
    published = (("torchtitan", titan, replay_sharded(
        trace, titan, model, world_size, semantics=semantics, grad_accum=grad_accum,
        compute_slowdown=compute_slowdown)),)
    smallest = None
    try:
        best = optimum(problem if cap == memory_cap_bytes
                       else replace(problem, memory_cap_bytes=cap))
    except NoLayoutFits as exc:  # said in the advice, with FSDP2's default for reference
        best, smallest = Scored(default, default_replay), exc.smallest_peak_bytes
    margin = model_margin(model, comm_spec, ("all_gather", "reduce_scatter"), margin_pct,
                          world_size)
    accum = [] if grad_accum == 1 else [
        f"times are per optimizer step of {grad_accum} micro-batches (gradient sync off "
        "for the first ones: every micro-batch all-gathers, the last reduce-scatters; the "
        "unsharded gradients are held across micro-batches)"]
    if cap is not None and best.plan.info.get("exact") is False \
            and mixed_precision is None:  # the bound counts the cap (of the trace's bytes)
        bound = capped_lower_bound_s(trace, model, world_size, cap, grad_accum,
                                     best.plan.keep_unsharded_between_microbatches)
        best.plan.info.update({"lower_bound_s": bound, "lower_bound_counts_cap": True,
                               "gap_to_bound_pct": 100.0 * (best.replay.iteration_s / bound - 1)})
    notes = accum + memory_notes(budget) + search_notes(best.plan) + sharded_notes(
        trace, model, world_size, comm_spec, (("FSDP2 default", default), ("optimum", best.plan)))
    return ShardedAdvice(default, default_replay, best.plan, best.replay, margin, semantics,
                         world_size, cap, tuple(trace.names), tuple(notes), smallest,
                         published)


def capped_lower_bound_s(trace: ComputeTrace, model: CommModel, world_size: int,
                         cap_bytes: float, grad_accum: int = 1,
                         keep_unsharded: bool = False) -> float:
    """:func:`gradsched.replay.sharded_bounds.sharded_lower_bound_s` with the memory cap
    counted: no unit gathers more than ``cap_bytes``, so at least ``n = ceil(total /
    cap_bytes)`` units all-gather (``grad_accum`` times each, once when the parameters stay
    unsharded) and reduce-scatter, each paying its start-up on the shared wire, beside the
    wire time of every byte and the sharded optimizer step."""
    bound = sharded_lower_bound_s(trace, model, world_size, grad_accum, keep_unsharded)
    seq = layer_seq(trace)
    total = float(seq.nbytes.sum())
    if world_size <= 1 or seq.n == 0 or cap_bytes <= 0:
        return bound
    units = max(1, -(-int(total) // max(int(cap_bytes), 1)))
    gathers = 1 if keep_unsharded else grad_accum
    rate = model.sustained_algbw_Bps(world_size)
    wire = 0.0 if rate == float("inf") else (gathers + 1) * total / (2.0 * rate)
    update = float(seq.update_s.sum()) / world_size
    comm = units * (gathers * model.startup_s("all_gather", world_size)
                    + model.startup_s("reduce_scatter", world_size)) + wire + update
    return max(bound, comm)


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


def memory_notes(budget: MemoryBudget | None) -> list[str]:
    """What the memory cap rests on (none on CPU runs, which name no GPU)."""
    return [] if budget is None else [f"memory: {budget.text()}"]


def search_notes(plan: ShardedPlan) -> list[str]:
    """That a search stood in for part of the optimum, and how far from the bound it is."""
    info = plan.info
    if info.get("exact") is not False:
        return []
    capped = " with the memory cap counted" if info.get("lower_bound_counts_cap") else ""
    return [f"the optimum is {info['method']}: within {info['gap_to_bound_pct']:.3g} % of "
            f"the lower bound{capped} ({info['lower_bound_s']:.4g} s), not proven optimal"]


PUBLISHED_LABELS = {"torchtitan": "torchtitan (emb/blocks/head)"}
"""The rows ``advise --sharded`` prints for the published layouts it replays."""


def published_gain_text(default: ShardedReplay, other: ShardedReplay) -> str:
    """A published layout's predicted gain and peak change against FSDP2's default (a tie
    within :data:`gradsched.ties.RTOL` said as one)."""
    peak = (other.gathered_peak_bytes - default.gathered_peak_bytes) / MIB
    if same_time(other.iteration_s, default.iteration_s):
        return f"a tie in time, peak {peak:+.4g} MiB"
    return (f"gain {100.0 * (default.iteration_s / other.iteration_s - 1.0):+.3g} %, peak "
            f"{peak:+.4g} MiB")


def gain_text(adv: ShardedAdvice) -> str:
    """The gain, or a tie when the two times are the same within :data:`gradsched.ties.RTOL`
    (never float noise such as +8.88e-14 %)."""
    if same_time(adv.best_replay.iteration_s, adv.default_replay.iteration_s):
        return "a tie (the same predicted time as FSDP2's default)"
    return f"{adv.gain_pct:+.3g} %"


def paste_code(plan: ShardedPlan, names: tuple[str, ...], full: bool = False) -> str:
    """The ``fully_shard`` calls a user pastes: a loop when every unit is one block of the
    same container (``model.layers.<i>``) with one resharding setting; else the first
    :data:`LISTED_UNITS` units of :func:`gradsched.plan_sharded.fully_shard_code` and a
    pointer to ``--plan-out`` (``full``: every line)."""
    if full:
        return fully_shard_code(plan, names)
    under = tensors_under(names)
    mods = [covering_modules(u.tensors, names, under) for u in plan.units]
    container = _uniform_container(mods)
    reshard = {u.reshard_after_forward for u in plan.units}
    if container is not None and len(reshard) == 1:
        head = [] if plan.mixed_precision is None else [  # the mixed-precision policy
            line for line in fully_shard_code(plan, names).splitlines()
            if line.startswith(("mp = ", "# torchao"))]
        policy = ", mp_policy=mp" if head else ""
        lines = [*head, f"for block in model.get_submodule({container!r}):",
                 f"    fully_shard(block, reshard_after_forward={reshard.pop()}{policy})",
                 f"fully_shard(model{policy})"]
        f, b = plan.forward_prefetch, plan.backward_prefetch
        if (f, b) != (1, 1):  # FSDP2 prefetches one block each way by itself
            lines += [f"blocks = list(model.get_submodule({container!r}))",
                      "for i, block in enumerate(blocks):"]
            lines += ([f"    block.set_modules_to_forward_prefetch(blocks[i + 1:i + {f + 1}])"]
                      if f != 1 else [])
            lines += ([f"    block.set_modules_to_backward_prefetch(blocks[max(i - {b}, 0):i]"
                       "[::-1])"] if b != 1 else [])
        if plan.keep_unsharded_between_microbatches:
            lines += [line for line in fully_shard_code(plan, names).splitlines()
                      if line.startswith("#")]
        return "\n".join(lines)
    code = fully_shard_code(plan, names)  # the loop above needs none of it
    shown = [_as_range(line) for line in code.splitlines() if _unit_of(line) < LISTED_UNITS]
    if len(shown) == len(code.splitlines()):
        return code
    return "\n".join([*shown, f"# ... {plan.n_units - LISTED_UNITS} more units: --plan-out "
                               "PLAN.json prints the full listing"])


def _unit_of(line: str) -> int:
    """The unit a line of :func:`fully_shard_code` is about (``uK = ...``,
    ``fully_shard(uK, ...)``, ``uK[0].set_...``); -1 for the others."""
    found = re.match(r"(?:fully_shard\()?u(\d+)\b", line)
    return int(found.group(1)) if found else -1


def _as_range(line: str) -> str:
    """``uK = [model.get_submodule('c.i'), ..., model.get_submodule('c.j')]`` of consecutive
    blocks ``i..j`` as one comprehension; any other line unchanged."""
    head, sep, body = line.partition(" = [")
    if not sep or not body.endswith("]"):
        return line
    mods = [m.strip().removeprefix("model.get_submodule(").removesuffix(")").strip("'\"")
            for m in body[:-1].split(",")]
    parts = [m.rpartition(".") for m in mods]
    if len(mods) < 3 or any(not p[2].isdigit() or p[0] != parts[0][0] for p in parts):
        return line
    first = int(parts[0][2])
    if [int(p[2]) for p in parts] != list(range(first, first + len(parts))):
        return line
    return (f"{head} = [model.get_submodule(f'{parts[0][0]}.{{i}}') "
            f"for i in range({first}, {first + len(parts)})]")


def _uniform_container(mods: list[list[str]]) -> str | None:
    """``model.layers`` when unit ``k`` is exactly module ``model.layers.k``, else None."""
    if not mods or any(len(m) != 1 for m in mods):
        return None
    container = mods[0][0].rsplit(".", 1)[0]
    if "." not in mods[0][0] or any(m[0] != f"{container}.{k}" for k, m in enumerate(mods)):
        return None
    return container


def _row(label: str, plan: ShardedPlan, result: ShardedReplay) -> str:
    flags = {u.reshard_after_forward for u in plan.units}
    reshard = "mixed" if len(flags) > 1 else "yes" if flags == {True} else "no"
    return (f"  {label:<28} {result.iteration_s:8.3g} s  {plan.n_units:3d} units + root, "
            f"prefetch {plan.forward_prefetch}/{plan.backward_prefetch}, reshard "
            f"{reshard}, peak "
            f"{result.gathered_peak_bytes / MIB:.4g} MiB")


def render_sharded(adv: ShardedAdvice, full_listing: bool = False) -> str:
    """The advice as text, with the ``fully_shard`` calls to paste (:func:`paste_code`;
    ``full_listing``: every call, as ``--plan-out`` asks)."""
    lines = [f"gradsched advise --sharded: {adv.world_size} ranks, {adv.semantics} "
             "collectives; predicted iteration time (replay) and peak of gathered parameters "
             "and unsharded gradients per rank:",
             _row("FSDP2 default (per block)", adv.default, adv.default_replay)]
    for name, plan, result in adv.published:
        lines.append(_row(PUBLISHED_LABELS.get(name, name), plan, result))
    if adv.smallest_peak_bytes is None:  # else no layout fits: there is no optimum to show
        lines.append(_row("optimum", adv.best, adv.best_replay))
    if adv.default.mixed_precision is not None:
        lines.append(f"  collectives' dtypes (param/reduce): {adv.default.mixed_precision.label}")
    for name, _, result in adv.published:
        lines.append(f"  {PUBLISHED_LABELS.get(name, name)} against FSDP2's default: "
                     f"{published_gain_text(adv.default_replay, result)}")
    if adv.memory_cap_bytes is not None:
        lines.append(f"  memory cap: {adv.memory_cap_bytes / MIB:.4g} MiB"
                     + ("" if adv.default_fits else " (FSDP2's default exceeds it)"))
    band = (adv.gain_pct - adv.margin.pct, adv.gain_pct + adv.margin.pct)
    tie = same_time(adv.best_replay.iteration_s, adv.default_replay.iteration_s)
    if adv.smallest_peak_bytes is None and tie:
        lines.append(f"gain of the optimum: {gain_text(adv)}")
    elif adv.smallest_peak_bytes is None and not adv.margin.band_known:
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
    lines.append(paste_code(adv.chosen, adv.names, full_listing))
    lines += [f"note: {n}" for n in adv.notes]
    return "\n".join(lines) + "\n"
