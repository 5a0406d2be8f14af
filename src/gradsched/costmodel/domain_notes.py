"""The domain notes every command prints: one place, many callers.

A prediction is flagged, never quoted bare, where it leaves what its comm model measured
(:mod:`.domain`):

* **an extrapolated world size** -- the model was fitted at other world sizes and a
  formula carries it to this one (:meth:`CommModel.world_size_basis`); the note names
  the fitted world sizes and the model's measured cross-world-size error, or says that
  the extrapolation was never validated (:meth:`CommModel.extrapolation`);
* **a derived collective** -- a reduce-scatter, all-gather or broadcast priced from
  all-reduce measurements (:data:`~gradsched.costmodel.base.DERIVED_FROM_ALL_REDUCE`, the
  ring share of an all-reduce's traffic, Thakur, Rabenseifner & Gropp 2005, Sec. 4) rather
  than from its own (:meth:`CommModel.collective_basis`);
* **out-of-range message sizes** -- more than
  :data:`~gradsched.costmodel.domain.MATERIAL_SHARE_PCT` of a prediction's communication
  time priced outside the measured sizes (:func:`.domain.shares_warning`);
* **sweeps that contradict each other** -- of one network, a larger world measured
  faster per byte than a smaller one (:func:`contradictions`): bus bandwidth
  ``m / t * (P - 1) / P`` (nccl-tests' ``busbw`` up to the collective's constant factor,
  NVIDIA nccl-tests ``doc/PERFORMANCE.md``) higher by more than
  :data:`CONTRADICTION_TOLERANCE` at a common message size. A ring cannot move a byte
  across more ranks faster on the same links; such a pair comes from different jobs,
  placements or congestion, and a model fitted to both inherits it (ABCI's 64-rank A100
  sweep has 15.2 GB/s bus bandwidth at 32 MiB, its 128-rank sweep 26.6 GB/s).

Each note is one line; commands print them once on stderr as
``gradsched <command>: warning: <note>`` (:func:`print_notes`), ``advise`` also keeps
them in its advice (text and JSON).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gradsched.costmodel.base import DERIVED_FROM_ALL_REDUCE, CommModel
from gradsched.costmodel.domain import (
    BASIS_EXTRAPOLATED,
    DERIVED,
    RangeShares,
    shares_warning,
)
from gradsched.costmodel.series import select_series, series_points
from gradsched.costmodel.wire import LARGE_REGION
from gradsched.errors import GradschedError
from gradsched.traces.bundle import CommTrace

CONTRADICTION_TOLERANCE = 0.10
"""A larger world is flagged when its bus bandwidth exceeds the smaller one's by more than
this fraction (run-to-run spread of nccl-tests at large sizes is a few percent)."""

_PLAN_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def _sizes(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in sorted(values))


def world_size_note(model: CommModel, world_size: int) -> str | None:
    """The note for an extrapolated world size, with the fitted world sizes and the
    measured extrapolation error (or that it was never validated); ``None`` otherwise."""
    try:
        basis = model.world_size_basis(world_size)
    except GradschedError:
        return None
    if basis != BASIS_EXTRAPOLATED:
        return None
    fitted = model.fit_world_sizes()
    where = (f"fitted at world size{'s' if len(fitted) > 1 else ''} {_sizes(fitted)}"
             if fitted
             else "a level of the model was fitted at other world sizes")
    record = model.extrapolation() or {}
    worst = record.get("max_ape_pct")
    if isinstance(worst, int | float) and np.isfinite(worst):
        validated = record.get("validated_world_sizes") or []
        median = record.get("median_ape_pct")
        err = (f"its measured extrapolation error is {float(worst):.4g} % worst"
               + (f", {float(median):.4g} % median" if isinstance(median, int | float) else "")
               + (f" (predicting {_sizes(validated)})" if validated else ""))
        largest = max((int(w) for w in validated), default=None)
        if largest is not None and world_size > largest:
            err += (f"; {world_size} is beyond the largest validated world size ({largest}), "
                    "where that error was not measured")
    else:
        err = "the extrapolation was never validated (its error is unknown)"
    return (f"domain: world size {world_size} was not measured ({where}; extrapolated by the "
            f"model): every predicted time is an extrapolation; {err}")


def derived_note(model: CommModel, world_size: int,
                 collectives: Iterable[str] = _PLAN_COLLECTIVES) -> str | None:
    """The note for the collectives of ``collectives`` that the model prices from another
    collective's measurements; ``None`` when none is."""
    items: list[str] = []
    for collective in dict.fromkeys(collectives):
        try:
            records = model.collective_basis(collective, world_size)
        except GradschedError:
            continue
        for rec in records:
            if rec.status != DERIVED:
                continue
            text = f"{rec.collective} from {rec.source}" + (f" ({rec.part})" if rec.part else "")
            if text not in items:
                items.append(text)
    if not items:
        return None
    return ("domain: derived collectives, not measured: " + "; ".join(items)
            + " (priced from the measured collective's curve scaled by the ring share of its "
              "traffic, Thakur, Rabenseifner & Gropp 2005)")


@dataclass(frozen=True)
class Sweep:
    """One measured (or modelled) curve of one collective at one world size."""

    label: str
    collective: str
    world_size: int
    nbytes: np.ndarray
    times_s: np.ndarray


def _bus(sweep: Sweep, m: np.ndarray) -> np.ndarray:
    """Bus bandwidth (bytes/s up to the collective's constant) of ``sweep`` at sizes ``m``
    (log-log interpolation between its points)."""
    p = sweep.world_size
    t = np.exp(np.interp(np.log(m), np.log(sweep.nbytes), np.log(sweep.times_s)))
    return m / t * (p - 1) / p


def contradictions(sweeps: Sequence[Sweep]) -> list[str]:
    """One note per pair of sweeps of one collective where the larger world size is faster
    per byte than the smaller by more than :data:`CONTRADICTION_TOLERANCE`, at the common
    large message sizes (within :data:`~gradsched.costmodel.wire.LARGE_REGION` of the
    largest common size); the note names the worst size."""
    notes = []
    ordered = sorted(sweeps, key=lambda s: (s.collective, s.world_size))
    for i, small in enumerate(ordered):
        for large in ordered[i + 1:]:
            if large.collective != small.collective or large.world_size <= small.world_size:
                continue
            if small.world_size < 2:
                continue
            lo = max(small.nbytes[0], large.nbytes[0])
            hi = min(small.nbytes[-1], large.nbytes[-1])
            if not hi > lo:
                continue
            common = np.union1d(small.nbytes, large.nbytes)
            m = common[(common >= max(lo, hi / LARGE_REGION)) & (common <= hi)]
            if m.size == 0:
                continue
            ratio = _bus(large, m) / _bus(small, m)
            k = int(np.argmax(ratio))
            if ratio[k] <= 1.0 + CONTRADICTION_TOLERANCE:
                continue
            bus = 2.0 * DERIVED_FROM_ALL_REDUCE[small.collective] / 1e9  # nccl-tests busbw
            notes.append(
                f"domain: contradicting sweeps: {large.collective} at world size "
                f"{large.world_size} ({large.label}) is faster per byte than at world size "
                f"{small.world_size} ({small.label}): bus bandwidth "
                f"{_bus(large, m[k:k + 1])[0] * bus:.3g} against "
                f"{_bus(small, m[k:k + 1])[0] * bus:.3g} GB/s at {m[k]:.0f} bytes "
                f"({100 * (ratio[k] - 1):.0f} % faster); predictions between and beyond "
                "them inherit the contradiction")
    return notes


def file_contradictions(paths: Sequence[str | Path], in_place: bool = False) -> list[str]:
    """:func:`contradictions` among the measured series of comm-trace files, per network
    (backend, and the sidecar's ``interconnect`` and ``devices`` where recorded): what
    ``gradsched fit`` says about the files it is given."""
    groups: dict[str, dict[tuple[str, int], Sweep]] = {}
    for path in paths:
        trace = CommTrace.load(path)
        devices = " ".join(map(str, trace.meta.get("devices") or []))
        where = f"{trace.meta.get('interconnect', '')} {devices}".strip()
        for info, rows in select_series(trace.frame, in_place=in_place):
            m, t = series_points(rows)
            key = (str(info["collective"]), int(info["world_size"]))
            groups.setdefault(f"{info['backend']} {where}", {}).setdefault(
                key, Sweep(str(path), key[0], key[1], m, t))
    return [note for network in sorted(groups)
            for note in contradictions(list(groups[network].values()))]


def model_sweeps(model: CommModel, label: str) -> list[Sweep]:
    """The curves a model holds at its measured world sizes, read back at its measured
    sizes (a topology model: those of each level)."""
    topology = getattr(model, "topology", None)
    if topology is not None:
        return (model_sweeps(topology.intra, f"{label}, intra-node level")
                + model_sweeps(topology.inter, f"{label}, inter-node level"))
    fitted = model.fit_world_sizes() or ()
    out = []
    for world_size in fitted:
        for collective in _PLAN_COLLECTIVES:
            try:
                records = model.collective_basis(collective, world_size)
                measured = model.measured_bytes(collective, world_size)
            except GradschedError:
                continue
            if measured is None or not all(r.status == "measured" for r in records):
                continue
            m = np.geomspace(measured[0], max(measured[1], measured[0]), 64)
            t = np.asarray(model.raw_times(collective, m, world_size), dtype=float)
            if np.all(t > 0):
                out.append(Sweep(label, collective, int(world_size), m, t))
    return out


def model_notes(model: CommModel, world_size: int, source: str,
                collectives: Iterable[str] = _PLAN_COLLECTIVES) -> list[str]:
    """The notes about the model at ``world_size``: extrapolated world size, derived
    collectives, contradicting sweeps (``source`` names the model in them)."""
    notes = [n for n in (world_size_note(model, world_size),
                         derived_note(model, world_size, collectives)) if n]
    if len(model.fit_world_sizes() or ()) > 1 or getattr(model, "topology", None) is not None:
        notes += contradictions(model_sweeps(model, source))
    return notes


def range_notes(parts: Sequence[tuple[str, RangeShares | None]]) -> list[str]:
    """One note per prediction priced materially outside the measured sizes."""
    return [text for what, shares in parts if shares is not None
            for text in [shares_warning(shares, f"domain: {what}", "")] if text]


def domain_notes(model: CommModel, world_size: int, source: str,
                 parts: Sequence[tuple[str, RangeShares | None]],
                 collectives: Iterable[str] = _PLAN_COLLECTIVES) -> list[str]:
    """Every domain note of one command's predictions: the out-of-range shares of each of
    ``parts`` (what, shares), then :func:`model_notes`."""
    return range_notes(parts) + model_notes(model, world_size, source, collectives)


def print_notes(command: str, notes: Iterable[str]) -> None:
    """Print each note once, one line each, on stderr (``gradsched <command>: warning:``)."""
    for note in dict.fromkeys(notes):
        print(f"gradsched {command}: warning: {note}", file=sys.stderr)
