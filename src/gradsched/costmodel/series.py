"""Models that hold one fitted curve per measured (collective, world size) series.

A fitted model describes the cluster sizes it was measured at and nothing else:
querying a world size it does not hold is a :class:`~gradsched.errors.ConfigError`
that lists the world sizes it has (use an ``analytic`` or ``scaled`` model to predict
other sizes). A collective that was not measured at a held world size is derived
from a measured one with the ring-algorithm factors of
:data:`~gradsched.costmodel.base.DERIVED_FROM_ALL_REDUCE` (Thakur, Rabenseifner &
Gropp 2005): ``T_c(M) = T_m(M) * f_c / f_m``, preferring the all-reduce curve.

Subclasses implement one curve type: ``_curve_times(params, nbytes)`` (vectorised)
and the JSON form of one curve's parameters.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from gradsched.costmodel.base import (
    DERIVED_FROM_ALL_REDUCE,
    CommModel,
    check_collective,
    register_model,
)
from gradsched.costmodel.domain import (
    BASIS_MEASURED,
    BASIS_UNKNOWN,
    DERIVED,
    CollectiveBasis,
    domain_index,
)
from gradsched.errors import ConfigError, InputError
from gradsched.limits import MAX_RANKS, is_real

SeriesKey = tuple[str, int]  # (collective, world_size)


def series_points(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (bytes, time_s) float arrays of one series frame; rejects non-positive values."""
    nbytes = frame["bytes"].to_numpy(dtype=float)
    times = frame["time_s"].to_numpy(dtype=float)
    order = np.argsort(nbytes, kind="stable")
    nbytes, times = nbytes[order], times[order]
    if nbytes.size == 0:
        raise InputError("empty series")
    if np.any(nbytes <= 0) or np.any(times <= 0) or not np.all(np.isfinite(times)):
        raise InputError("series has non-positive or non-finite bytes/time_s values")
    if np.any(np.diff(nbytes) <= 0):
        raise InputError("series has repeated message sizes")
    return nbytes, times


def select_series(
    frame: pd.DataFrame, in_place: bool = False
) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Split a comm-trace frame into series (one per collective/backend/algorithm/ws/nodes).

    Only rows with ``in_place == in_place`` are kept; a series measured only in the other
    mode is used as a fallback so a file with in-place rows only still yields curves.
    Returns (info, rows) with ``info`` holding the series key fields.
    """
    keys = ["collective", "backend", "algorithm", "world_size", "nodes"]
    work = frame if "algorithm" in frame.columns else frame.assign(algorithm="default")
    out: list[tuple[dict[str, Any], pd.DataFrame]] = []
    for key, grp in work.groupby(keys, sort=True):
        flags = grp["in_place"].astype(bool)
        chosen = grp[flags == in_place]
        used = in_place
        if chosen.empty:
            chosen = grp[flags != in_place]
            used = not in_place
        info = dict(zip(keys, key, strict=True))
        info["world_size"] = int(info["world_size"])
        info["nodes"] = int(info["nodes"])
        info["in_place"] = bool(used)
        out.append((info, chosen.sort_values("bytes").reset_index(drop=True)))
    return out


def backend_meta(infos: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What ran the series' collectives, for a model's metadata: ``{"backend": b}`` when
    they share one, ``{"backends": [...]}`` when they do not (Horovod's loop blocks on mpi
    and gloo, not on nccl: ``planners/horovod.py``)."""
    backends = sorted({str(info["backend"]) for info in infos})
    if len(backends) == 1:
        return {"backend": backends[0]}
    return {"backends": backends} if backends else {}


def check_unique_series(infos: Iterable[dict[str, Any]], source: str) -> None:
    """Refuse two series with the same (collective, world size) in one model."""
    seen: dict[SeriesKey, dict[str, Any]] = {}
    for info in infos:
        key = (str(info["collective"]), int(info["world_size"]))
        if key in seen:
            other = seen[key]
            raise InputError(
                f"two series for {key[0]} at world size {key[1]}: "
                f"(backend={other['backend']}, algorithm={other['algorithm']}, "
                f"nodes={other['nodes']}) and (backend={info['backend']}, "
                f"algorithm={info['algorithm']}, nodes={info['nodes']}); one model holds one "
                "curve per (collective, world size): split the trace or fit the files separately",
                path=source,
            )
        seen[key] = info


class SeriesModel(CommModel):
    """Base of the fitted models: a curve per (collective, world_size)."""

    kind: ClassVar[str] = ""

    def __init__(self, curves: dict[SeriesKey, Any], meta: dict[str, Any] | None = None) -> None:
        if not curves:
            raise ConfigError(f"a {self.kind} model needs at least one series")
        for collective, world_size in curves:
            check_collective(collective)
            if int(world_size) < 1:
                raise ConfigError(f"world size must be >= 1, got {world_size}")
        self.curves: dict[SeriesKey, Any] = {
            (str(c), int(w)): p for (c, w), p in sorted(curves.items())
        }
        self.meta: dict[str, Any] = dict(meta or {})
        self._resolved: dict[SeriesKey, tuple[Any, float]] = {}

    def line_rate_Bps(self) -> float | None:
        """``meta['line_rate_Bps']``: the per-rank link rate of the measured network."""
        rate = self.meta.get("line_rate_Bps")
        return None if rate is None else float(rate)

    def world_sizes(self) -> tuple[int, ...]:
        """World sizes held (sorted)."""
        return tuple(sorted({w for _, w in self.curves}))

    def source_key(self, collective: str, world_size: int) -> SeriesKey:
        """The measured series that answers ``collective`` at ``world_size``: its own, or
        the all-reduce (else the first) series held at that world size."""
        key = (collective, int(world_size))
        check_collective(collective)
        if key in self.curves:
            return key
        held = [c for c, w in self.curves if w == int(world_size)]
        if not held:
            raise ConfigError(
                f"this {self.kind} model holds world sizes "
                f"{', '.join(map(str, self.world_sizes()))}, not {world_size}; fit a trace "
                "measured at that size, or use an analytic or scaled model "
                "(gradsched fit --cross-world-size) to predict other sizes"
            )
        return ("all_reduce" if "all_reduce" in held else held[0], int(world_size))

    def resolve(self, collective: str, world_size: int) -> tuple[Any, float]:
        """(curve parameters, factor) answering ``collective`` at ``world_size``."""
        cache_key = (collective, int(world_size))
        hit = self._resolved.get(cache_key)
        if hit is not None:
            return hit
        source = self.source_key(collective, world_size)
        factor = DERIVED_FROM_ALL_REDUCE[collective] / DERIVED_FROM_ALL_REDUCE[source[0]]
        found = (self.curves[source], factor)
        self._resolved[cache_key] = found
        return found

    def measured_bytes(self, collective: str, world_size: int) -> tuple[float, float] | None:
        """The measured sizes of the series answering ``collective`` (``meta["domain"]``,
        :mod:`.domain`; a model fitted before domains were recorded has none)."""
        if int(world_size) not in self.world_sizes():
            return None
        return domain_index(self.meta.get("domain")).get(self.source_key(collective,
                                                                         world_size))

    def reference_bytes(self, world_size: int) -> float:
        """The largest measured size of the series answering all-reduce at ``world_size``
        (``meta["domain"]``), so that the wire floor reads the sweep's own sustained
        bandwidth among its largest messages; the default (64 MiB) where no domain is
        recorded. (A fitted piecewise model of an 8-byte to 8 GiB H100 sweep read 59 GB/s
        near 64 MiB where the sweep reaches 180 GB/s, and priced an 8 GiB all-reduce at
        3x its measured time.)"""
        measured = self.measured_bytes("all_reduce", world_size)
        if measured is None:
            return super().reference_bytes(world_size)
        return float(measured[1])

    def world_size_basis(self, world_size: int) -> str:
        return BASIS_MEASURED if int(world_size) in self.world_sizes() else BASIS_UNKNOWN

    def fit_world_sizes(self) -> tuple[int, ...]:
        return self.world_sizes()

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """Measured where the model holds a series of ``collective`` at ``world_size``;
        derived from the series that answers it otherwise (:meth:`source_key`)."""
        if int(world_size) not in self.world_sizes():
            return (CollectiveBasis(collective, BASIS_UNKNOWN),)
        source = self.source_key(collective, world_size)[0]
        if source == collective:
            return (CollectiveBasis(collective, BASIS_MEASURED),)
        return (CollectiveBasis(collective, DERIVED, source),)

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        params, factor = self.resolve(collective, world_size)
        out = self._curve_times(params, np.asarray(nbytes, dtype=float))
        return out * factor if factor != 1.0 else out

    @abstractmethod
    def _curve_times(self, params: Any, nbytes: np.ndarray) -> np.ndarray:
        """Vectorised prediction of one curve."""

    @staticmethod
    @abstractmethod
    def curve_to_dict(params: Any) -> dict[str, Any]:
        """JSON form of one curve."""

    @staticmethod
    @abstractmethod
    def curve_from_dict(data: dict[str, Any]) -> Any:
        """Inverse of :meth:`curve_to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        series = [
            {"collective": c, "world_size": w, **self.curve_to_dict(p)}
            for (c, w), p in sorted(self.curves.items())
        ]
        out: dict[str, Any] = {"kind": self.kind, "series": series}
        if self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SeriesModel:
        items = data.get("series")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise InputError(f"malformed {cls.kind} model: series must be a list of objects",
                             field="series")
        curves: dict[SeriesKey, Any] = {}
        index = 0
        try:
            for index, item in enumerate(data["series"]):
                key = (str(item["collective"]), _world_size(item["world_size"]))
                if key in curves:  # the later one would silently replace the first
                    raise InputError(f"a second {key[0]} series at world size {key[1]}",
                                     field=f"series[{index}]")
                curves[key] = cls.curve_from_dict(item)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            if isinstance(exc, KeyError):
                raise InputError(f"malformed {cls.kind} model: series[{index}] has no key "
                                 f"{exc} ({type(exc).__name__}: {exc})",
                                 field=f"series[{index}]") from None
            raise InputError(f"malformed {cls.kind} model: {type(exc).__name__}: {exc}",
                             field="series") from None
        return cls(curves, data.get("meta"))


def _world_size(value: Any) -> int:
    """A series' world size: a JSON integer in [1, MAX_RANKS] (no string or float)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_RANKS:
        raise ValueError(f"world_size must be an integer in [1, {MAX_RANKS}], got {value!r}")
    return value


@register_model
class AlphaBetaSeriesModel(SeriesModel):
    """Hockney's T(M) = alpha + beta*M fitted per (collective, world size) series.

    The multi-series counterpart of :class:`~gradsched.costmodel.base.AlphaBetaModel`
    (which ignores the world size); written by ``gradsched fit --model alpha-beta``.
    """

    kind = "alpha-beta-series"

    def _curve_times(self, params: tuple[float, float], nbytes: np.ndarray) -> np.ndarray:
        return params[0] + params[1] * nbytes

    @staticmethod
    def curve_to_dict(params: tuple[float, float]) -> dict[str, Any]:
        return {"alpha_s": float(params[0]), "beta_s_per_byte": float(params[1])}

    @staticmethod
    def curve_from_dict(data: dict[str, Any]) -> tuple[float, float]:
        if not (is_real(data["alpha_s"]) and is_real(data["beta_s_per_byte"])):
            raise ConfigError("alpha_s and beta_s_per_byte must be JSON numbers")
        alpha, beta = float(data["alpha_s"]), float(data["beta_s_per_byte"])
        if not (np.isfinite(alpha) and alpha >= 0 and np.isfinite(beta) and beta >= 0):
            raise ConfigError(f"alpha/beta must be finite and >= 0, got {alpha}, {beta}")
        return alpha, beta
