"""A measured curve scaled to other world sizes by an analytic formula's ratio.

``scaled`` keeps the measured shape (protocol switches) of a fitted per-series model and
borrows only the *dependence on P* from an algorithm's alpha-beta-gamma formula F
(:mod:`gradsched.costmodel.formulas`). With P0 the held world size nearest to P (in
log2 P; the smaller on a tie):

    P > P0:  T(M, P) = T_fit(M, P0) + (F(M, P) - F(M, P0))      (add what the formula adds)
    P < P0:  T(M, P) = T_fit(M, P0) * F(M, P) / F(M, P0)         (shrink by the formula's ratio)

Both are exact when the measurements follow F, and both keep T non-decreasing in M for
the formulas here: F(M, P) - F(M, P0) is non-decreasing in M for P > P0 (every latency
and bandwidth coefficient grows with P), and F(M, P)/F(M, P0) is non-decreasing in M for
P < P0 (the latency ratio is the smaller one), whereas a ratio for P > P0 falls with M and
could make T decrease. At a held world size it is the fitted model itself.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel, model_from_dict, register_model
from gradsched.costmodel.domain import BASIS_EXTRAPOLATED, BASIS_MEASURED, CollectiveBasis
from gradsched.costmodel.formulas import AnalyticModel
from gradsched.costmodel.series import SeriesModel
from gradsched.errors import ConfigError


def scale_times(t_ref: np.ndarray, f_target: np.ndarray, f_ref: np.ndarray,
                larger: bool) -> np.ndarray:
    """Scale measured times at P0 to P (see the module docstring); ``larger`` = P > P0."""
    if larger:
        return t_ref + (f_target - f_ref)
    ratio = np.divide(f_target, f_ref, out=np.ones_like(f_target), where=f_ref > 0)
    return t_ref * ratio


@register_model
class ScaledModel(CommModel):
    """A :class:`SeriesModel` extended to any world size by an :class:`AnalyticModel` ratio."""

    kind = "scaled"

    def __init__(self, base: SeriesModel, analytic: AnalyticModel) -> None:
        if not isinstance(base, SeriesModel):
            raise ConfigError(f"scaled: the base must be a fitted series model, not {base.kind}")
        self.base = base
        self.analytic = analytic

    def line_rate_Bps(self) -> float | None:
        return self.base.line_rate_Bps()

    def reference_bytes(self, world_size: int) -> float:
        return self.base.reference_bytes(self.nearest_world_size(world_size))

    def measured_bytes(self, collective: str, world_size: int) -> tuple[float, float] | None:
        """The sizes measured at the held world size the curve is scaled from."""
        return self.base.measured_bytes(collective, self.nearest_world_size(world_size))

    def world_size_basis(self, world_size: int) -> str:
        return (BASIS_MEASURED if world_size in self.base.world_sizes()
                else BASIS_EXTRAPOLATED)

    def fit_world_sizes(self) -> tuple[int, ...]:
        return self.base.world_sizes()

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """As the base series it is scaled from (the nearest held world size)."""
        return self.base.collective_basis(collective, self.nearest_world_size(world_size))

    def extrapolation(self) -> dict[str, Any] | None:
        """The measured cross-world-size error recorded on the analytic part, else on the
        base."""
        return self.analytic.extrapolation() or self.base.extrapolation()

    def nearest_world_size(self, world_size: int) -> int:
        """The held world size nearest to ``world_size`` in log2."""
        held = self.base.world_sizes()
        return min(held, key=lambda w: (abs(math.log2(w) - math.log2(world_size)), w))

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        if world_size in self.base.world_sizes():
            return self.base.times(collective, nbytes, world_size)
        if world_size < 1:
            raise ConfigError(f"world size must be >= 1, got {world_size}")
        ref = self.nearest_world_size(world_size)
        m = np.asarray(nbytes, dtype=float)
        return scale_times(self.base.times(collective, m, ref),
                           self.analytic.times(collective, m, world_size),
                           self.analytic.times(collective, m, ref), world_size > ref)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "base": self.base.to_dict(), "analytic": self.analytic.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScaledModel:
        base = model_from_dict(data["base"])
        analytic = model_from_dict(data["analytic"])
        if not isinstance(analytic, AnalyticModel) or not isinstance(base, SeriesModel):
            raise ConfigError("scaled: 'base' must be a fitted series model and 'analytic' an "
                              "analytic model")
        return cls(base, analytic)
