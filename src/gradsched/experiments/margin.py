"""The margin of a recommendation: how much faster than the current setting a candidate
must be predicted before :mod:`gradsched.experiments.recommend` (and the sharded advice)
recommends it, and the band printed around a gain. The comm model's own error where it is
known: its held-out MAPE (``meta.heldout_mape_pct`` of ``gradsched fit -o``), the largest of
a topology's levels, or, at an extrapolated world size, its measured cross-world-size error
(``meta.extrapolation``); otherwise :data:`DEFAULT_MARGIN_PCT`, as a decision threshold
only."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain import BASIS_EXTRAPOLATED
from gradsched.errors import ConfigError

DEFAULT_MARGIN_PCT = 5.0
"""Margin (percent) when the comm model states no held-out error of its own."""


@dataclass(frozen=True)
class Margin:
    """How much faster than tuned DDP a plan must be predicted (percent), and why.
    ``band_known`` is false where the model's error at the world size is not known (an
    extrapolation never validated): ``pct`` is then only the decision threshold, and no
    band is printed."""

    pct: float
    source: str
    band_known: bool = True


def _span(sizes: Iterable[Any]) -> str:
    """``16`` or ``32..128``: the world sizes of an extrapolation record (``?`` where the
    record is malformed)."""
    try:
        values = sorted(int(v) for v in sizes)
    except (TypeError, ValueError):
        return "?"
    if not values:
        return "?"
    return str(values[0]) if len(values) == 1 else f"{values[0]}..{values[-1]}"


def extrapolation_margin(model: CommModel, comm_spec: str, world_size: int) -> Margin:
    """The margin at an extrapolated world size: the model's measured cross-world-size
    error (``meta.extrapolation.max_ape_pct``, the worst over the validated world sizes);
    where none is recorded the band is unknown and :data:`DEFAULT_MARGIN_PCT` is only the
    decision threshold."""
    record = model.extrapolation() or {}
    worst = record.get("max_ape_pct")
    fitted = record.get("fit_world_sizes") or model.fit_world_sizes() or ()
    if isinstance(worst, int | float) and not isinstance(worst, bool) and math.isfinite(worst):
        validated = record.get("validated_world_sizes") or ()
        return Margin(float(worst),
                      f"measured extrapolation error, fitted at {_span(fitted)} predicting "
                      f"{_span(validated)} (worst APE; meta.extrapolation of {comm_spec}), "
                      f"applied at world size {world_size}")
    return Margin(DEFAULT_MARGIN_PCT,
                  f"band unknown: world size {world_size} is extrapolated from "
                  f"{_span(fitted) if fitted else 'other world sizes'} and the extrapolation "
                  f"was never validated ({comm_spec} records no measured extrapolation "
                  f"error); the default {DEFAULT_MARGIN_PCT:g} % is only the decision "
                  "threshold", band_known=False)


def model_margin(model: CommModel, comm_spec: str, collectives: Iterable[str],
                 override_pct: float | None = None, world_size: int | None = None) -> Margin:
    """The margin (see the module docstring): ``override_pct``; at an extrapolated
    ``world_size``, :func:`extrapolation_margin`; else the largest held-out MAPE in the
    model JSON's ``meta`` over ``collectives``; else the default."""
    if override_pct is not None:
        if not (math.isfinite(override_pct) and override_pct >= 0):
            raise ConfigError(f"--margin-pct must be a finite number >= 0, got {override_pct}")
        return Margin(float(override_pct), "--margin-pct")
    if world_size is not None and model.world_size_basis(world_size) == BASIS_EXTRAPOLATED:
        return extrapolation_margin(model, comm_spec, world_size)
    needed = sorted(set(collectives))
    if getattr(model, "topology", None) is not None:
        return topology_margin(model, comm_spec, needed)
    meta = getattr(model, "meta", None) or {}
    held = meta.get("heldout_mape_pct") if comm_spec.endswith(".json") else None
    if isinstance(held, Mapping) and held and all(c in held for c in needed):
        worst = max(needed, key=lambda c: float(held[c]))
        return Margin(float(held[worst]),
                      f"held-out MAPE of the fit ({worst}, the largest of "
                      f"{', '.join(needed)}; meta.heldout_mape_pct of {comm_spec})")
    if comm_spec.endswith(".csv"):
        why = "the comm spec is a measured sweep (interpolated, no held-out error)"
    elif comm_spec.endswith(".json"):
        why = ("the model JSON states no held-out error for "
               + ", ".join(needed) + " (refit with gradsched fit -o to record it)")
    else:
        why = "the comm spec is an inline model with no error of its own"
    return Margin(DEFAULT_MARGIN_PCT, f"default {DEFAULT_MARGIN_PCT:g} %: {why}")


def level_collectives(model: CommModel, needed: Iterable[str]) -> dict[str, set[str]]:
    """The collectives each level of a topology collective model runs for ``needed``
    (:mod:`gradsched.costmodel.topology`): the hierarchical all-reduce runs reduce-scatter
    and all-gather inside the node and the all-reduce across; the flat ring paces each
    collective by both levels' own."""
    wanted = set(needed)
    if model.kind != "topology-hierarchical":
        return {"intra": wanted, "inter": wanted}
    intra = wanted - {"all_reduce"}
    if "all_reduce" in wanted:
        intra |= {"reduce_scatter", "all_gather"}
    return {"intra": intra, "inter": wanted}


def topology_margin(model: CommModel, topology_path: str, needed: Sequence[str]) -> Margin:
    """The margin of a topology collective model: the largest held-out MAPE
    (``meta.heldout_mape_pct`` of a fitted level, ``gradsched fit -o``) over both levels and
    the collectives each runs (:func:`level_collectives`). Both models are per-message
    sums (hierarchical) or maxima (flat) of the level times, whose relative error is at
    most the largest of the levels'. A level without a held-out error (a measured sweep,
    an inline or identified model) gives :data:`DEFAULT_MARGIN_PCT`."""
    topo = model.topology  # type: ignore[attr-defined]
    worst: tuple[float, str] | None = None
    for level, collectives in level_collectives(model, needed).items():
        held = (getattr(getattr(topo, level), "meta", None) or {}).get("heldout_mape_pct")
        if not isinstance(held, Mapping) or not all(c in held for c in collectives):
            return Margin(DEFAULT_MARGIN_PCT,
                          f"default {DEFAULT_MARGIN_PCT:g} %: the {level}-node level of "
                          f"topology {topology_path} states no held-out error for "
                          + ", ".join(sorted(collectives)))
        for c in collectives:
            if worst is None or float(held[c]) > worst[0]:
                worst = (float(held[c]), f"{level}-node {c}")
    assert worst is not None
    return Margin(worst[0], f"held-out MAPE of the topology's levels ({worst[1]}, the "
                            f"largest; meta.heldout_mape_pct of the levels of {topology_path})")
