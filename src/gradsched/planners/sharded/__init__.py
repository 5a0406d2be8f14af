"""Planners of sharded data parallelism: which layers form one FSDP2 unit, whether each is
resharded after forward, and how far the all-gathers are prefetched.

Every planner is ``plan(trace, model, world_size, **knobs) -> ShardedPlan``; the root (the
tensors of no block: stem, embeddings, heads) stays FSDP2's root unit in every plan. The
exact optimum, which scores candidates with the replay, is
:func:`gradsched.experiments.sharded.optimum.optimum`.

* ``fsdp2``: one unit per block, as users write ``fully_shard`` (module docstring of
  :mod:`gradsched.traces.layers`); FSDP2's defaults: ``reshard_after_forward=True``,
  backward prefetch of one unit (``FSDPParamGroup._backward_prefetch``) and a forward
  prefetch depth (knob, default 1: on a GPU the host runs ahead and issues the next
  unit's all-gather while the current one computes, FSDP2's "implicit forward prefetching",
  ``_fsdp_param_group.py`` module comment; 0 = what a CPU process without run-ahead does).
* ``fsdp2-noreshard``: FSDP2's default units and prefetch with
  ``reshard_after_forward=False`` on every unit (the one flag a user changes to keep each
  unit's parameters gathered from forward to backward: one all-gather per unit instead of
  two, at the cost of memory); the baseline the optimum must beat once resharding is off.
* ``fsdp2-saturation``: consecutive blocks merged into units up to the bucket cap that
  torch's compiler uses for FSDP collectives (``torch/_inductor/fx_passes/fsdp.py``
  ``compute_pre_bucket_cap_mb``, torch 2.14.1): the all-gather size that reaches 90 % of
  the link's bandwidth, ``m* = 0.9 / (1 - 0.9) x start-up x bandwidth``
  (``comm_analysis.compute_min_saturation_bytes``), clipped to 10-500 MB
  (``pre_bucketing_fsdp_collectives_{min,max}_bucket_cap_mb``); start-up and bandwidth are
  those of the comm model. Merging as ``greedy_bucket_collective_by_mb`` does: a unit is
  closed before a block that would push it past the cap (a larger block stays alone).
* ``fsdp2-cap``: the same merge with a cap given in MiB (knob ``unit_mb``).
* ``zero3``: DeepSpeed ZeRO-3's defaults in FSDP2's unit form (a labelled approximation:
  DeepSpeed gathers per module and reduce-scatters in buckets independent of modules).
  Units: consecutive blocks merged up to ``reduce_bucket_size`` elements (default 5e8,
  ``DeepSpeedZeroConfig.reduce_bucket_size``, "number of elements reduced/allreduced at a
  time"); prefetch: as many following units as fit in ``stage3_prefetch_bucket_size``
  elements (default 5e7, "maximum number of parameter elements to fetch ahead of use"),
  the same depth forward and backward, the smallest that holds for every window; resharded
  after forward (ZeRO-3 releases a module's parameters after use).
  Source: ``deepspeed/runtime/zero/config.py``.
* ``torchtitan``, ``torchtitan-2024``: torchtitan's layouts, the embeddings and the head in
  units of their own or the last block kept gathered
  (:mod:`gradsched.planners.sharded.torchtitan`).
* ``hsdp``: FSDP2's per-block units on a device mesh (HSDP: replicate x shard) with
  ``reshard_after_forward`` true, false or an integer (:mod:`.hsdp`,
  :mod:`gradsched.plan_mesh`); replayed by :mod:`gradsched.replay.sharded_mesh`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.limits import MAX_KNOB_MAGNITUDE
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.planners._family import MB, fill_groups
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq, block_ranges, layer_seq
from gradsched.units import parse_int, parse_real

SATURATION_EFFICIENCY = 0.9  # comm_analysis.compute_min_saturation_bytes target_efficiency
SATURATION_MIN_MB = 10.0  # pre_bucketing_fsdp_collectives_min_bucket_cap_mb
SATURATION_MAX_MB = 500.0  # pre_bucketing_fsdp_collectives_max_bucket_cap_mb


def units_from_ranges(seq: LayerSeq, ranges: list[tuple[int, int]],
                      reshard: bool | list[bool] = True) -> tuple[Unit, ...]:
    """Units holding the tensors of each (first, last) layer range."""
    flags = [reshard] * len(ranges) if isinstance(reshard, bool) else list(reshard)
    return tuple(Unit(tensors=tuple(t for j in range(a, b + 1) for t in seq.tensors[j]),
                      reshard_after_forward=flag)
                 for (a, b), flag in zip(ranges, flags, strict=True))


def merge_blocks(blocks: list[tuple[int, int]], ends: np.ndarray) -> list[tuple[int, int]]:
    """Layer ranges of groups of consecutive blocks (``ends``: exclusive block indices)."""
    starts = [0, *ends[:-1].tolist()]
    return [(blocks[s][0], blocks[e - 1][1]) for s, e in zip(starts, ends.tolist(), strict=True)]


def check_depth(name: str, value: int, n_units: int) -> int:
    """A prefetch depth: 0 up to the plan's number of units (a unit prefetches at most
    every other unit; a deeper value would be written into the plan and do nothing)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"--knob {name}={value!r}: must be an integer >= 0")
    if value > max(n_units, 1):
        raise ConfigError(f"--knob {name}={value}: a prefetch depth is at most the plan's "
                          f"number of units ({n_units})")
    return value


def fsdp2(trace: ComputeTrace, model: CommModel, world_size: int, *, forward_prefetch: int = 1,
          backward_prefetch: int = 1, reshard_after_forward: bool = True) -> ShardedPlan:
    """FSDP2 as users write it: one unit per block (see the package docstring)."""
    seq = layer_seq(trace)
    units = units_from_ranges(seq, block_ranges(seq), reshard_after_forward)
    return ShardedPlan(
        algorithm="fsdp2", units=units,
        forward_prefetch=check_depth("forward_prefetch", forward_prefetch, len(units)),
        backward_prefetch=check_depth("backward_prefetch", backward_prefetch, len(units)),
        knobs={"forward_prefetch": forward_prefetch, "backward_prefetch": backward_prefetch,
               "reshard_after_forward": reshard_after_forward},
        info={"world_size": world_size, "n_blocks": len(block_ranges(seq))})


def fsdp2_noreshard(trace: ComputeTrace, model: CommModel, world_size: int, *,
                    forward_prefetch: int = 1, backward_prefetch: int = 1) -> ShardedPlan:
    """FSDP2's default units, ``reshard_after_forward=False`` (package docstring)."""
    plan = fsdp2(trace, model, world_size, forward_prefetch=forward_prefetch,
                 backward_prefetch=backward_prefetch, reshard_after_forward=False)
    return replace(plan, algorithm="fsdp2-noreshard")


def capped(trace: ComputeTrace, cap_bytes: float, algorithm: str, knobs: dict[str, Any],
           forward_prefetch: int, backward_prefetch: int) -> ShardedPlan:
    """Consecutive blocks merged while the unit stays within ``cap_bytes``."""
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    sizes = np.asarray([seq.nbytes[a:b + 1].sum() for a, b in blocks], dtype=float)
    ranges = merge_blocks(blocks, fill_groups(sizes, [cap_bytes], overflow=False)) if blocks \
        else []
    units = units_from_ranges(seq, ranges)
    return ShardedPlan(algorithm=algorithm, units=units,
                       forward_prefetch=check_depth("forward_prefetch", forward_prefetch,
                                                     len(units)),
                       backward_prefetch=check_depth("backward_prefetch", backward_prefetch,
                                                      len(units)),
                       knobs=dict(knobs), info={"unit_cap_bytes": cap_bytes,
                                                "n_blocks": len(blocks)})


def saturation_cap_bytes(model: CommModel, world_size: int) -> float:
    """The compiler's FSDP bucket cap for this comm model (package docstring)."""
    ratio = SATURATION_EFFICIENCY / (1.0 - SATURATION_EFFICIENCY)
    startup = model.startup_s("all_gather", world_size)
    rate = model.sustained_algbw_Bps(world_size)
    raw = ratio * startup * rate if np.isfinite(rate) else SATURATION_MAX_MB * MB
    return float(min(max(raw, SATURATION_MIN_MB * MB), SATURATION_MAX_MB * MB))


def fsdp2_saturation(trace: ComputeTrace, model: CommModel, world_size: int, *,
                     forward_prefetch: int = 1, backward_prefetch: int = 1) -> ShardedPlan:
    """Blocks merged up to the compiler's saturation cap (package docstring)."""
    cap = saturation_cap_bytes(model, world_size)
    return capped(trace, cap, "fsdp2-saturation",
                  {"forward_prefetch": forward_prefetch, "backward_prefetch": backward_prefetch},
                  forward_prefetch, backward_prefetch)


def fsdp2_cap(trace: ComputeTrace, model: CommModel, world_size: int, *, unit_mb: float = 25.0,
              forward_prefetch: int = 1, backward_prefetch: int = 1) -> ShardedPlan:
    """Blocks merged up to ``unit_mb`` MiB per unit."""
    if not unit_mb > 0:
        raise ConfigError(f"unit_mb must be > 0, got {unit_mb}")
    return capped(trace, unit_mb * MB, "fsdp2-cap",
                  {"unit_mb": unit_mb, "forward_prefetch": forward_prefetch,
                   "backward_prefetch": backward_prefetch}, forward_prefetch, backward_prefetch)


ZERO_REDUCE_BUCKET_ELEMENTS = 5e8  # DeepSpeedZeroConfig.reduce_bucket_size
ZERO_PREFETCH_ELEMENTS = 5e7  # DeepSpeedZeroConfig.prefetch_bucket_size


def zero_prefetch_depth(unit_elements: list[float], budget: float) -> int:
    """The largest depth ``d`` such that every window of ``d`` consecutive units after a
    unit fits in ``budget`` elements (0 when even one unit does not)."""
    depth = 0
    for d in range(1, len(unit_elements)):
        windows = [sum(unit_elements[i + 1:i + 1 + d]) for i in range(len(unit_elements) - d)]
        if max(windows) > budget:
            break
        depth = d
    return depth


def zero3(trace: ComputeTrace, model: CommModel, world_size: int, *,
          reduce_bucket_size: float = ZERO_REDUCE_BUCKET_ELEMENTS,
          prefetch_bucket_size: float = ZERO_PREFETCH_ELEMENTS) -> ShardedPlan:
    """DeepSpeed ZeRO-3's bucket rule in unit form (package docstring)."""
    if not reduce_bucket_size > 0 or not prefetch_bucket_size >= 0:
        raise ConfigError("reduce_bucket_size must be > 0 and prefetch_bucket_size >= 0 "
                          "(elements)")
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    element = float(trace.frame["bytes"].sum() / max(int(trace.frame["numel"].sum()), 1))
    sizes = np.asarray([seq.nbytes[a:b + 1].sum() for a, b in blocks], dtype=float) / element
    ranges = merge_blocks(blocks, fill_groups(sizes, [reduce_bucket_size], overflow=False)) \
        if blocks else []
    units = [float(seq.nbytes[a:b + 1].sum()) / element for a, b in ranges]
    depth = zero_prefetch_depth(units, prefetch_bucket_size)
    knobs = {"reduce_bucket_size": reduce_bucket_size,
             "prefetch_bucket_size": prefetch_bucket_size}
    return ShardedPlan(algorithm="zero3", units=units_from_ranges(seq, ranges),
                       forward_prefetch=depth, backward_prefetch=max(depth, 1), knobs=knobs,
                       info={"n_blocks": len(blocks), "element_bytes": element,
                             "approximation": "ZeRO-3's rule in FSDP2's unit form"})


# torchtitan's layouts use the helpers above: imported once they are defined
from gradsched.planners.sharded.torchtitan import torchtitan, torchtitan_2024  # noqa: E402


@dataclass(frozen=True)
class ShardedPlanner:
    """A sharded planner and the types of its knobs."""

    name: str
    func: Callable[..., ShardedPlan]
    knobs: Mapping[str, type]


SHARDED_PLANNERS: dict[str, ShardedPlanner] = {
    "fsdp2": ShardedPlanner("fsdp2", fsdp2, {"forward_prefetch": int, "backward_prefetch": int,
                                             "reshard_after_forward": bool}),
    "fsdp2-noreshard": ShardedPlanner("fsdp2-noreshard", fsdp2_noreshard,
                                      {"forward_prefetch": int, "backward_prefetch": int}),
    "fsdp2-saturation": ShardedPlanner("fsdp2-saturation", fsdp2_saturation,
                                       {"forward_prefetch": int, "backward_prefetch": int}),
    "fsdp2-cap": ShardedPlanner("fsdp2-cap", fsdp2_cap, {"unit_mb": float,
                                                         "forward_prefetch": int,
                                                         "backward_prefetch": int}),
    "zero3": ShardedPlanner("zero3", zero3, {"reduce_bucket_size": float,
                                             "prefetch_bucket_size": float}),
    "torchtitan": ShardedPlanner("torchtitan", torchtitan, {"forward_prefetch": int,
                                                            "backward_prefetch": int}),
    "torchtitan-2024": ShardedPlanner("torchtitan-2024", torchtitan_2024,
                                      {"forward_prefetch": int, "backward_prefetch": int}),
}

# ``hsdp`` (:mod:`gradsched.planners.sharded.hsdp`): FSDP2's units on a device mesh; imported
# here, after ``fsdp2``, which it builds on.
# Kept apart from SHARDED_PLANNERS, which the single-mesh comparisons iterate: a mesh plan is
# replayed by gradsched.replay.sharded_mesh on a two-level cluster.
from gradsched.plan_mesh import parse_reshard  # noqa: E402
from gradsched.planners.sharded.hsdp import hsdp  # noqa: E402

MESH_PLANNERS: dict[str, ShardedPlanner] = {
    "hsdp": ShardedPlanner("hsdp", hsdp, {"shard": int, "reshard_after_forward": parse_reshard,
                                          "forward_prefetch": int, "backward_prefetch": int}),
}


def make_sharded_plan(name: str, trace: ComputeTrace, model: CommModel, world_size: int,
                      knobs: Mapping[str, Any] | None = None) -> ShardedPlan:
    """Run sharded planner ``name`` with ``knobs`` (strings parsed to the knob's type)."""
    known = {**SHARDED_PLANNERS, **MESH_PLANNERS}
    if name not in known:
        raise ConfigError(f"unknown sharded planner {name!r}; known: "
                          f"{', '.join(sorted(SHARDED_PLANNERS))}")
    spec = known[name]
    parsed: dict[str, Any] = {}
    for key, value in (knobs or {}).items():
        if key not in spec.knobs:
            raise ConfigError(f"sharded planner {name!r} has no knob {key!r}; valid: "
                              f"{', '.join(spec.knobs)}")
        parsed[key] = _parse(key, value, spec.knobs[key])
    return spec.func(trace, model, world_size, **parsed)


def _parse(key: str, value: Any, kind: type) -> Any:
    """A knob value of type ``kind``: strings in the one number grammar
    (:mod:`gradsched.units`), numbers finite and of magnitude at most
    :data:`~gradsched.limits.MAX_KNOB_MAGNITUDE` (``unit_mb=1e308`` is refused, as for
    the DDP-style planners' knobs)."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if not isinstance(value, str) or value.lower() not in ("true", "false"):
                raise ValueError(value)
            return value.lower() == "true"
        if isinstance(value, bool):
            raise ValueError(value)
        if kind is int:
            number: Any = parse_int(value) if isinstance(value, str) else value
            if not isinstance(number, int):
                raise ValueError(value)
        elif kind is float:
            number = parse_real(value) if isinstance(value, str) else float(value)
        else:
            return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"knob {key}: expected {kind.__name__}, got {value!r}") from None
    if not math.isfinite(number) or abs(number) > MAX_KNOB_MAGNITUDE:
        raise ConfigError(f"knob {key}: {value!r} is not a finite number of magnitude "
                          f"<= {MAX_KNOB_MAGNITUDE:g}")
    return number
