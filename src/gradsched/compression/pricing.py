"""Pricing gradient compression for the replay (:mod:`gradsched.replay.engine`).

The replay asks its cost model for the time of every bucket's ``all_reduce`` of ``nbytes``
bytes. :class:`CompressedCommModel` wraps any :class:`~gradsched.costmodel.base.CommModel`
and answers instead with the time of the *compressed* bucket:

    T(nbytes) = c0 + c1 * numel  +  sum over the compressor's messages of base.time(m)

with ``numel = nbytes / element_size``; the messages are
:meth:`Compressor.messages` (top-k: one all-gather of ``P x 2k`` words, Lin et al. 2018;
importance-weighted pruning: a broadcast of ``k`` indices and an all-reduce of ``k``
values, Cheng & Xu 2019; gTop-k: ``log2 P`` pairwise exchanges of ``2k`` words, Shi et al.
2019, each priced as a broadcast of its size, an approximation the base model can answer);
``c0 + c1 * numel`` is the compressor's own computation (selection, packing, scatter),
fitted to ``gradsched compress profile`` measurements on this machine
(:func:`compute_cost_from_profile`). So a plan replayed with the wrapped model has every
bucket's compression compute serialised *before* its collective on the communication
channel (it delays that bucket's communication, not the backward pass: the selection runs
on the side stream, as in DGC's implementation). Dense all-reduce passes through unchanged.
Only ``all_reduce`` buckets can be compressed; other collectives raise.

:func:`gradsched.experiments.compression.compressed_replay` replays a plan both ways; the
profile the compute cost is fitted to is :func:`gradsched.compression.profile.profile_compressors`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from gradsched.compression import make_compressor
from gradsched.compression.base import Compressor
from gradsched.costmodel.base import CommModel, model_from_dict
from gradsched.costmodel.domain import CollectiveBasis
from gradsched.errors import ConfigError, InputError
from gradsched.intermediates import read_csv_frame


@dataclass(frozen=True)
class ComputeCost:
    """A compressor's own computation per bucket: ``intercept_s + s_per_element x numel``."""

    intercept_s: float = 0.0
    s_per_element: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.intercept_s) and self.intercept_s >= 0):
            raise ConfigError("intercept_s must be a finite number >= 0")
        if not (math.isfinite(self.s_per_element) and self.s_per_element >= 0):
            raise ConfigError("s_per_element must be a finite number >= 0")

    def times(self, numel: np.ndarray) -> np.ndarray:
        return self.intercept_s + self.s_per_element * np.asarray(numel, dtype=float)


def compute_cost_from_profile(profile: str | Path | Any, method: str, density: float,
                              world_size: int | None = None,
                              column: str = "compute_s") -> ComputeCost:
    """Least-squares fit (non-negative, relative error) of ``column = c0 + c1 numel`` to the
    profile rows of ``method`` at ``density`` (within 1 %; dense: every density).
    ``column="compute_s_min"`` uses the fastest call instead of the median (less sensitive
    to other processes on a shared machine)."""
    frame = profile if isinstance(profile, pd.DataFrame) else read_csv_frame(profile)
    rows = frame[(frame["method"] == method)
                 & (np.isclose(frame["density"], density, rtol=1e-2) | (method == "dense"))]
    if world_size is not None and "world_size" in rows and (rows["world_size"] == world_size
                                                            ).any():
        rows = rows[rows["world_size"] == world_size]
    if rows.empty:
        raise InputError(f"no profile rows for {method} at density {density:g}",
                         path=str(profile) if not isinstance(profile, pd.DataFrame) else None)
    x = rows["numel"].to_numpy(float)
    y = rows[column].to_numpy(float)
    if len(x) == 1:
        return ComputeCost(0.0, max(float(y[0] / x[0]), 0.0))
    # relative weighting: every size counts, not just the largest
    w = 1.0 / np.maximum(y, 1e-12)
    coef, _ = nnls(np.column_stack([np.ones_like(x), x]) * w[:, None], y * w)
    return ComputeCost(float(coef[0]), float(coef[1]))


class CompressedCommModel(CommModel):
    """``base`` with every all-reduce replaced by ``compressor``'s messages plus its compute
    time (see module doc)."""

    kind = "compressed"
    # Its messages are floored by the base model; the compressed total legitimately moves
    # fewer bytes than the dense tensor, so no floor of its own.
    wire_floor_applies = False

    def __init__(self, base: CommModel, compressor: Compressor,
                 compute: ComputeCost | None = None, element_size: int = 4) -> None:
        self.base = base
        self.compressor = compressor
        self.compute = compute or ComputeCost()
        self.element_size = int(element_size)

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        if collective != "all_reduce":
            raise ConfigError(f"compressed buckets are all-reduced; the plan asks for "
                              f"{collective!r} (use all_reduce buckets with compression)")
        sizes = np.asarray(nbytes, dtype=float)
        out = np.zeros(sizes.shape)
        for i, nb in enumerate(sizes.ravel()):
            numel = max(int(np.rint(nb / self.element_size)), 1)
            t = float(self.compute.times(np.array([numel]))[0])
            for msg in self.compressor.messages(numel, world_size, self.element_size):
                coll = "broadcast" if msg.collective == "sendrecv" else msg.collective
                t += self.base.time(coll, float(msg.nbytes), world_size)
            out.flat[i] = t
        return out

    def startup_s(self, collective: str, world_size: int) -> float:
        # start-ups of the messages plus the compute intercept: the size-independent part
        msgs = self.compressor.messages(1, world_size, self.element_size)
        total = self.compute.intercept_s
        for msg in msgs:
            coll = "broadcast" if msg.collective == "sendrecv" else msg.collective
            total += self.base.startup_s(coll, world_size)
        return total

    def world_sizes(self) -> tuple[int, ...] | None:
        return self.base.world_sizes()

    def world_size_basis(self, world_size: int) -> str:
        return self.base.world_size_basis(world_size)

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """The base model's records of the collectives the compressor's messages run."""
        names = dict.fromkeys("broadcast" if m.collective == "sendrecv" else m.collective
                              for m in self.compressor.messages(1, world_size,
                                                                self.element_size))
        return tuple(b.within(f"compressed {collective}") for c in names
                     for b in self.base.collective_basis(c, world_size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "base": self.base.to_dict(),
                "compressor": self.compressor.spec(),
                "compute": {"intercept_s": self.compute.intercept_s,
                            "s_per_element": self.compute.s_per_element},
                "element_size": self.element_size}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompressedCommModel:
        spec = dict(data["compressor"])
        comp = make_compressor(spec.pop("method"), spec.pop("density"),
                               momentum=spec.pop("momentum", 0.0), seed=spec.pop("seed", 0))
        comp_cost = ComputeCost(**data.get("compute", {}))
        return cls(model_from_dict(data["base"]), comp, comp_cost,
                   int(data.get("element_size", 4)))
