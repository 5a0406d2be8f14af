"""Fit the ``nccl`` model on the smallest measured scale of a family of sweeps and measure
its error on every other world size (``gradsched fit --cross-world-size``, the default
method).

The fit world sizes (``--fit-on``) may name at most one multi-node sweep (it calibrates the
level between nodes) and at most one single-node sweep (inside a node); every other world
size of the family is predicted. The machine is read from the fitted sweeps' sidecars
(:func:`.hardware.from_trace_meta`); a sweep whose GPUs per node differ from the machine's is
refused (the layout would be wrong). ``--hardware`` moves the calibrated model to another
machine afterwards (:meth:`.model.NCCLModel.on_hardware`); the table's rows stay those of the
measured machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.costmodel.domain import series_record
from gradsched.costmodel.nccl.calibrate import Sweep, calibrate
from gradsched.costmodel.nccl.fabric import FABRICS, per_doubling
from gradsched.costmodel.nccl.hardware import Hardware, from_trace_meta
from gradsched.costmodel.nccl.model import NCCLModel
from gradsched.costmodel.nccl.tuning import layout
from gradsched.errors import ConfigError


@dataclass(frozen=True)
class NCCLSettings:
    """The settings of ``--method nccl``: the fabric slowdown (:mod:`.fabric`) and, where
    given, the machine to move the calibrated model to (``--hardware``)."""

    fabric: str = "issue-1229"
    hardware: Hardware | None = None

    def __post_init__(self) -> None:
        if self.fabric not in FABRICS:
            raise ConfigError(f"--fabric {self.fabric!r}: use one of {', '.join(FABRICS)}")


@dataclass(frozen=True)
class MeasuredSweep:
    """One series of a family with what its sidecar says about the machine."""

    info: dict[str, Any]
    nbytes: np.ndarray
    times_s: np.ndarray
    meta: dict[str, Any]
    source: str


def _sweep(collective: str, s: MeasuredSweep) -> Sweep:
    return Sweep(collective, int(s.info["world_size"]), int(s.info["nodes"]), s.nbytes,
                 s.times_s)


def _fit_sweeps(collective: str, by_ws: dict[int, MeasuredSweep], fit_on: list[int]
                ) -> tuple[MeasuredSweep | None, MeasuredSweep | None]:
    missing = [w for w in fit_on if w not in by_ws]
    if missing:
        raise ConfigError(
            f"--fit-on {','.join(map(str, fit_on))}: {collective} has no series at world size "
            f"{','.join(map(str, missing))}; it has {', '.join(map(str, sorted(by_ws)))}")
    multi = [by_ws[w] for w in fit_on if int(by_ws[w].info["nodes"]) > 1]
    single = [by_ws[w] for w in fit_on if int(by_ws[w].info["nodes"]) <= 1]
    if len(multi) > 1 or len(single) > 1:
        raise ConfigError(
            "--method nccl is calibrated on one multi-node sweep (the smallest scale) and at "
            "most one single-node sweep: --fit-on names "
            f"{len(multi)} multi-node and {len(single)} single-node world sizes")
    return (multi[0] if multi else None), (single[0] if single else None)


def fit_family(name: str, collective: str, by_ws: dict[int, MeasuredSweep],
               fit_on: list[int], settings: NCCLSettings
               ) -> tuple[NCCLModel, list[dict[str, Any]], list[str]]:
    """The calibrated model, one table row per world size (``role`` fitted or predicted) and
    notes for the user."""
    inter, intra = _fit_sweeps(collective, by_ws, fit_on)
    anchor = inter or intra
    assert anchor is not None
    hw = from_trace_meta(anchor.meta, int(anchor.info["world_size"]),
                         int(anchor.info["nodes"]), anchor.source)
    notes = list(hw.notes())
    for ws, s in sorted(by_ws.items()):
        nodes = int(s.info["nodes"])
        if nodes > 1 and ws != nodes * hw.gpus_per_node:
            raise ConfigError(f"{s.source}: {ws} ranks on {nodes} nodes is not "
                              f"{hw.gpus_per_node} GPUs per node as the machine "
                              f"{hw.name} has")
        if nodes <= 1 and ws > hw.gpus_per_node:
            raise ConfigError(f"{s.source}: {ws} ranks on one node, more than the "
                              f"{hw.gpus_per_node} GPUs per node of {hw.name}")
    k = per_doubling(settings.fabric)
    hw, params, _ = calibrate(hw, _sweep(collective, inter) if inter else None,
                              _sweep(collective, intra) if intra else None, k)
    if k and hw.full_bisection_nodes:
        notes.append(f"fabric slowdown: none on up to {hw.full_bisection_nodes} nodes (one "
                     "full-bisection domain of the machine, placement in one assumed), "
                     "per doubling beyond")
    if hw.ll128 and not hw.net_ll128:
        notes.append("LL128 between nodes: off (the fitted multi-node sweep is closer "
                     "without it: NCCL enables it only with a PCIe-switch-close NIC)")
    if intra is None:
        notes.append("no single-node sweep fitted: the level inside a node keeps the "
                     "inter-node fit's share of the line rate and its base latencies "
                     "(a derivation)")
    if inter is None:
        notes.append("no multi-node sweep fitted: the level between nodes is derived from "
                     "the single-node fit")
    fitted = [s for s in (inter, intra) if s is not None]
    meta: dict[str, Any] = {
        "series": name, "collective": collective,
        "fitted_from": sorted({s.source for s in fitted}),
        "fit_world_sizes": sorted(int(s.info["world_size"]) for s in fitted),
        "fit_nodes": sorted(int(s.info["nodes"]) for s in fitted),
        "domain": [series_record(s.info, s.nbytes) for s in fitted],
        "hardware": hw.name, "fabric": settings.fabric,
        "fabric_free_nodes": hw.full_bisection_nodes,
        "derived": [n for n in notes if "derivation" in n or "derived" in n],
    }
    model = NCCLModel(hw, params, meta)
    rows = []
    for ws, s in sorted(by_ws.items()):
        pred = model.times(collective, s.nbytes, ws)
        ape = 100.0 * np.abs(pred - s.times_s) / s.times_s
        rows.append({
            "series": name, "collective": collective, "algorithm": "nccl",
            "fit_world_sizes": ";".join(map(str, fit_on)), "predict_world_size": ws,
            "nodes": int(s.info["nodes"]),
            "role": "fitted" if ws in fit_on else "predicted",
            "mape_pct": float(ape.mean()), "max_ape_pct": float(ape.max()),
        })
        if layout(ws, hw.gpus_per_node)[1] != max(1, int(s.info["nodes"])):
            notes.append(f"world size {ws}: packed on {layout(ws, hw.gpus_per_node)[1]} "
                         f"nodes here, measured on {s.info['nodes']}")
    model = replace_meta(model, meta)
    if settings.hardware is not None:
        model = model.on_hardware(settings.hardware)
        notes.append(f"retargeted from the measured {hw.name} to {settings.hardware.name}: "
                     "bandwidths keep their fitted share of the line rate, latencies are "
                     "kept; every world size on it is an extrapolation (the rows are the "
                     "measured machine's)")
        notes.extend(settings.hardware.notes())
    return model, rows, notes


def replace_meta(model: NCCLModel, meta: dict[str, Any]) -> NCCLModel:
    """``model`` with ``meta`` (a fresh object: the model's domain index is rebuilt)."""
    return NCCLModel(model.hardware, model.params, dict(meta))


__all__ = ["MeasuredSweep", "NCCLSettings", "fit_family"]
