"""What a comm model was measured on, and how much of a prediction lies outside it.

A fitted or loaded sweep answers every message size and, through a scaled model, every
world size, but it was measured on a finite grid: nccl-tests sweeps often start at 1 MiB,
the MG-WFBP authors' K80 logs cover the blobs of one model, a loopback sweep stops at a
few hundred MiB. Outside that grid the model extends a line (:mod:`.interp`) or a
formula (:mod:`.scaling`), and the number it returns is an extrapolation.

A model's *domain* is one record per measured series (collective, world size, nodes,
smallest and largest size, number of sizes), kept in the model's metadata under
``"domain"`` so that it survives ``gradsched fit`` -> JSON -> ``--comm model.json``.
:func:`out_of_range_shares` prices a list of messages and says which share of the
modelled communication time was priced below the smallest or above the largest measured
size of the curve that answered it; :func:`world_size_basis` says whether the world size
was measured. The replay records both per row, and ``replay``, ``plan`` and ``advise``
warn when the share passes :data:`MATERIAL_SHARE_PCT`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MATERIAL_SHARE_PCT = 5.0
"""Out-of-range share (percent of modelled communication time) that a command warns about."""

MOSTLY_OUTSIDE_PCT = 50.0
"""A replay row whose out-of-range share exceeds this is *mostly* an extrapolation: the
paper's maxima and medians leave it out (it stays in the tables, marked)."""

BASIS_MEASURED = "measured"
BASIS_EXTRAPOLATED = "extrapolated"
BASIS_UNKNOWN = "unknown"
DERIVED = "derived"
"""A collective priced from another collective's measurements (``collective_basis``)."""


def combine_bases(bases: Iterable[str]) -> str:
    """The world-size basis of a composite model from its parts': extrapolated if any
    part is, measured if every part is, else unknown."""
    seen = list(bases)
    if BASIS_EXTRAPOLATED in seen:
        return BASIS_EXTRAPOLATED
    if seen and all(b == BASIS_MEASURED for b in seen):
        return BASIS_MEASURED
    return BASIS_UNKNOWN


@dataclass(frozen=True)
class CollectiveBasis:
    """How a model prices one collective (:meth:`CommModel.collective_basis`):
    ``status`` is ``measured`` (from a series of that collective), ``derived`` (from the
    measurements of ``source``, e.g. a reduce-scatter priced as half an all-reduce,
    :data:`gradsched.costmodel.base.DERIVED_FROM_ALL_REDUCE`) or ``unknown`` (the model
    does not record what it measured); ``part`` names the level of a composite model."""

    collective: str
    status: str
    source: str | None = None
    part: str = ""

    def within(self, part: str) -> CollectiveBasis:
        """The same, as a part of a composite model."""
        label = part if not self.part else f"{part}, {self.part}"
        return CollectiveBasis(self.collective, self.status, self.source, label)


def series_record(info: Mapping[str, Any], nbytes: np.ndarray) -> dict[str, Any]:
    """The domain record of one measured series (``info`` as :func:`select_series` gives
    it; ``nbytes`` its measured sizes)."""
    m = np.asarray(nbytes, dtype=float)
    return {"collective": str(info["collective"]), "world_size": int(info["world_size"]),
            "nodes": int(info.get("nodes", 1)), "min_bytes": float(m.min()),
            "max_bytes": float(m.max()), "sizes": int(m.size)}


def domain_index(records: Iterable[Mapping[str, Any]] | None
                 ) -> dict[tuple[str, int], tuple[float, float]]:
    """(collective, world size) -> (smallest, largest) measured bytes of a ``"domain"``
    metadata list; malformed entries are skipped (the domain is then unknown there)."""
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for rec in records or ():
        try:
            key = (str(rec["collective"]), int(rec["world_size"]))
            lo, hi = float(rec["min_bytes"]), float(rec["max_bytes"])
        except (KeyError, TypeError, ValueError):
            continue
        if np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi:
            out[key] = (lo, hi)
    return out


@dataclass(frozen=True)
class RangeShares:
    """Percent of modelled communication time priced outside the measured sizes;
    NaN where the model does not know what it was measured on."""

    below_pct: float
    above_pct: float

    @property
    def below_or_none(self) -> float | None:
        return None if np.isnan(self.below_pct) else self.below_pct

    @property
    def above_or_none(self) -> float | None:
        return None if np.isnan(self.above_pct) else self.above_pct

    @property
    def outside_pct(self) -> float:
        return self.below_pct + self.above_pct

    def material(self) -> bool:
        """Whether a command should warn (NaN is not material: nothing is known)."""
        return bool(self.outside_pct > MATERIAL_SHARE_PCT)


IN_RANGE = RangeShares(0.0, 0.0)
"""Every message inside the measured sizes."""


def range_bounds(ranges: Sequence[tuple[float, float] | None], which: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per message, the (smallest, largest) measured bytes of ``ranges[which[i]]`` as two
    arrays (NaN where a range is ``None``: unknown), without a Python loop per message."""
    lo = np.array([np.nan if r is None else r[0] for r in ranges], dtype=float)
    hi = np.array([np.nan if r is None else r[1] for r in ranges], dtype=float)
    index = np.asarray(which, dtype=np.int64)
    return lo[index], hi[index]


def out_of_range_shares(lo: np.ndarray, hi: np.ndarray, nbytes: np.ndarray,
                        seconds: np.ndarray) -> RangeShares:
    """Shares of ``seconds`` (one entry per message of ``nbytes``) priced below ``lo`` or
    above ``hi``, the message's measured range (:func:`range_bounds`; NaN = unknown, and
    then the result is NaN)."""
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if not lo.shape == hi.shape == m.shape == t.shape:
        raise ValueError("one measured range per message is needed")
    total = float(t.sum())
    if m.size == 0 or total <= 0:
        return RangeShares(0.0, 0.0)
    if np.isnan(lo).any() or np.isnan(hi).any():
        return RangeShares(float("nan"), float("nan"))
    below = float(t[m < lo].sum())
    above = float(t[m > hi].sum())
    return RangeShares(100.0 * below / total, 100.0 * above / total)


def row_shares(row: Mapping[str, Any]) -> RangeShares:
    """The shares of a replay result row (``comm_below_range_pct``,
    ``comm_above_range_pct``)."""
    return RangeShares(_pct(row["comm_below_range_pct"]), _pct(row["comm_above_range_pct"]))


def _pct(value: Any) -> float:
    return float("nan") if value is None else float(value)


def shares_warning(shares: RangeShares, what: str, basis: str) -> str | None:
    """The one-line warning a command prints, or ``None`` when the prediction is inside
    the measured domain (world size measured, out-of-range share not material)."""
    parts = []
    if shares.material():
        parts.append(f"{shares.outside_pct:.1f} % of the modelled communication time is "
                     f"priced outside the measured message sizes ({shares.below_pct:.1f} % "
                     f"below the smallest, {shares.above_pct:.1f} % above the largest)")
    if basis == BASIS_EXTRAPOLATED:
        parts.append("the world size was not measured (extrapolated by a formula)")
    if not parts:
        return None
    return f"{what}: " + "; ".join(parts) + ": treat the time as an extrapolation"
