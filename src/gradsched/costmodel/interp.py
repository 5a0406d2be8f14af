"""Monotone interpolation of measured collective times in log-log space.

Inside the measured range: a PCHIP interpolant (Fritsch & Carlson 1980, :mod:`.pchip`, equal
bit for bit to scipy's ``PchipInterpolator``) of log(time) over log(bytes). PCHIP preserves
monotonicity of the data, so the points are first made non-decreasing by isotonic regression
in log time (pool-adjacent-violators, Barlow et al. 1972): a clean series is unchanged, a noisy one
(e.g. the OCI RoCE log) is replaced by its closest non-decreasing version (pooled values
are geometric means), and a warning counts the pooled points. Exponentiating keeps the
curve positive.

Outside the range: Hockney (alpha-beta) lines. Above the largest size, the line from the
largest point with the least-squares slope of the upper points (:func:`upper_slope`):
the bandwidth regime extended linearly in M (not a power law, which would
mis-extrapolate). Below the smallest size, the line through the two smallest points with
its intercept (the start-up, latency separated from transfer) clamped to [0, t_1]. The
curve stays non-negative, continuous at both ends and non-decreasing everywhere. Both are
extrapolations: the model records its measured sizes (:mod:`.domain`) and the replay
reports how much of its communication time was priced outside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gradsched.costmodel.base import register_model, register_trace_loader
from gradsched.costmodel.domain import series_record
from gradsched.costmodel.pchip import Pchip
from gradsched.costmodel.series import (
    SeriesModel,
    backend_meta,
    check_unique_series,
    select_series,
    series_points,
)
from gradsched.errors import ConfigError, InputError
from gradsched.limits import MAX_BYTES, MAX_SECONDS, is_real
from gradsched.traces.bundle import CommTrace


def isotonic_increasing(values: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit (pool adjacent violators, equal weights)."""
    out_vals: list[float] = []
    out_counts: list[int] = []
    for v in np.asarray(values, dtype=float):
        val, cnt = float(v), 1
        while out_vals and out_vals[-1] > val:
            pv, pc = out_vals.pop(), out_counts.pop()
            val = (pv * pc + val * cnt) / (pc + cnt)
            cnt += pc
        out_vals.append(val)
        out_counts.append(cnt)
    return np.repeat(out_vals, out_counts)


UPPER_REGION = 64.0
"""The tail above the largest size is fitted to the points within this factor of it (the
large-message region of :data:`gradsched.costmodel.wire.LARGE_REGION`)."""


def upper_slope(nbytes: np.ndarray, times: np.ndarray) -> float:
    """Seconds per byte of the line that extends a non-decreasing curve above its largest
    size: the least-squares slope of the points within :data:`UPPER_REGION` of the largest
    size, or their chord where that slope is not positive. The slope of the last two
    points alone is set by their noise on a sweep measured in fine steps (on a public
    A100 lookup table in 1 MiB steps it ranged from -0.59x to 1.37x the chord's)."""
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times, dtype=float)
    upper = m >= m[-1] / UPPER_REGION
    if np.count_nonzero(upper) < 2:
        upper[-2:] = True
    mu, tu = m[upper], t[upper]
    slope = float(np.polyfit(mu, tu, 1)[0]) if mu.size > 2 else 0.0
    if slope > 0.0:
        return slope
    return float((tu[-1] - tu[0]) / (mu[-1] - mu[0]))


@dataclass(frozen=True)
class InterpCurve:
    """Monotone log-log interpolant of (bytes, seconds) points (already non-decreasing)."""

    bytes_: tuple[float, ...]
    time_s: tuple[float, ...]

    def __post_init__(self) -> None:
        m = np.asarray(self.bytes_, dtype=float)
        t = np.asarray(self.time_s, dtype=float)
        if m.size != t.size or m.size < 1:
            raise ConfigError("interp curve: bytes and time_s must have the same, non-zero length")
        if np.any(m <= 0) or np.any(np.diff(m) <= 0):
            raise ConfigError("interp curve: bytes must be positive and strictly increasing")
        if np.any(t <= 0) or np.any(~np.isfinite(t)) or np.any(np.diff(t) < 0):
            raise ConfigError("interp curve: time_s must be positive and non-decreasing")
        object.__setattr__(self, "_m", m)
        object.__setattr__(self, "_t", t)
        if m.size >= 2:
            object.__setattr__(self, "_pchip", Pchip(np.log(m), np.log(t)))
            hi_slope = upper_slope(m, t)
            lo_slope = (t[1] - t[0]) / (m[1] - m[0])
            lo_alpha = min(max(t[0] - lo_slope * m[0], 0.0), t[0])
            lo_slope = (t[0] - lo_alpha) / m[0]
            object.__setattr__(self, "_ends", (lo_alpha, lo_slope, hi_slope))

    @classmethod
    def from_points(cls, nbytes: np.ndarray, times: np.ndarray) -> tuple[InterpCurve, int]:
        """Build from raw sorted points; returns the curve and the number of pooled points."""
        m = np.asarray(nbytes, dtype=float)
        logt = np.log(np.asarray(times, dtype=float))
        iso = isotonic_increasing(logt)
        changed = int(np.count_nonzero(np.abs(iso - logt) > 1e-12))
        # A point the pooling left alone keeps its measured time exactly (exp(log t) is t
        # only up to the last bit, and that bit differs between numpy's SIMD paths).
        kept = np.where(iso == logt, np.asarray(times, dtype=float), np.exp(iso))
        return cls(tuple(m.tolist()), tuple(kept.tolist())), changed

    def times(self, nbytes: np.ndarray) -> np.ndarray:
        m = np.asarray(nbytes, dtype=float)
        pts_m: np.ndarray = self._m  # type: ignore[attr-defined]
        pts_t: np.ndarray = self._t  # type: ignore[attr-defined]
        if pts_m.size == 1:
            return np.full(m.shape, pts_t[0])  # one point: a constant (documented degenerate)
        lo_alpha, lo_slope, hi_slope = self._ends  # type: ignore[attr-defined]
        inner = np.clip(m, pts_m[0], pts_m[-1])
        logt = self._pchip(np.log(inner))  # type: ignore[attr-defined]
        out = np.array(np.exp(logt), dtype=float)  # an array, also for one size
        # On a measured size the interpolant is its point, exactly: exp(log t) is not t in
        # the last bit, and a 1e-14 training error would be round-off printed as data.
        at = np.clip(np.searchsorted(pts_m, inner), 0, pts_m.size - 1)
        on_point = pts_m[at] == m
        out[on_point] = pts_t[at[on_point]]
        below = m < pts_m[0]
        if below.any():
            out[below] = lo_alpha + lo_slope * m[below]
        above = m > pts_m[-1]
        if above.any():
            out[above] = pts_t[-1] + hi_slope * (m[above] - pts_m[-1])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": [float(x) for x in self.bytes_], "time_s": [float(x) for x in self.time_s]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InterpCurve:
        """The JSON form: at least :data:`MIN_TRACE_SIZES` points, numbers in range."""
        nbytes, times = data["bytes"], data["time_s"]
        if not (isinstance(nbytes, list) and isinstance(times, list)
                and all(map(is_real, nbytes + times))):
            raise ConfigError("interp curve: bytes and time_s must be lists of numbers")
        if len(nbytes) < MIN_TRACE_SIZES:
            raise ConfigError(f"interp curve: {len(nbytes)} point(s); at least "
                              f"{MIN_TRACE_SIZES} sizes are needed (one size costs every "
                              "collective the same)")
        if max(nbytes, default=0) > MAX_BYTES or max(times, default=0) > MAX_SECONDS:
            raise ConfigError(f"interp curve: sizes beyond {MAX_BYTES} bytes or times beyond "
                              f"{MAX_SECONDS:g} s")
        return cls(tuple(float(x) for x in nbytes), tuple(float(x) for x in times))


@register_model
class InterpModel(SeriesModel):
    """Monotone log-log interpolation of measurements per (collective, world size)."""

    kind = "interp"

    def _curve_times(self, params: InterpCurve, nbytes: np.ndarray) -> np.ndarray:
        return params.times(nbytes)

    def measured_bytes(self, collective: str, world_size: int) -> tuple[float, float] | None:
        """The recorded domain, else the curve's own points (an interp curve is its
        measurements)."""
        recorded = super().measured_bytes(collective, world_size)
        if recorded is not None or int(world_size) not in self.world_sizes():
            return recorded
        curve = self.curves[self.source_key(collective, world_size)]
        return float(curve.bytes_[0]), float(curve.bytes_[-1])

    def reference_bytes(self, world_size: int) -> float:
        """The largest measured size of the curve answering all-reduce at ``world_size``."""
        params, _ = self.resolve("all_reduce", world_size)
        return float(params.bytes_[-1])

    @staticmethod
    def curve_to_dict(params: InterpCurve) -> dict[str, Any]:
        return params.to_dict()

    @staticmethod
    def curve_from_dict(data: dict[str, Any]) -> InterpCurve:
        return InterpCurve.from_dict(data)


MIN_TRACE_SIZES = 2
"""Fewest message sizes per series that ``--comm trace.csv`` accepts."""


def interp_model_from_trace(path: Path, in_place: bool = False) -> InterpModel:
    """``--comm trace.csv``: an interp model over every series of the file (out of place)."""
    trace = CommTrace.load(path)
    parts = select_series(trace.frame, in_place=in_place)
    check_unique_series([info for info, _ in parts], str(path))
    curves = {}
    domain = []
    for info, rows in parts:
        try:
            m, t = series_points(rows)
        except InputError as exc:
            raise InputError(f"{info['collective']} at world size {info['world_size']}: "
                             f"{exc.reason}", path=path) from None
        if m.size < MIN_TRACE_SIZES:
            raise InputError(f"{info['collective']} at world size {info['world_size']} has "
                             f"{m.size} message size; the comm trace is too small to fit: "
                             f"at least {MIN_TRACE_SIZES} sizes are needed to tell latency "
                             "from bandwidth (one size would cost every collective the "
                             "same, whatever its bytes)", path=path, field="bytes")
        curves[(info["collective"], info["world_size"])] = InterpCurve.from_points(m, t)[0]
        domain.append(series_record(info, m))
    meta: dict[str, Any] = {"source": str(path)}
    meta.update(backend_meta(info for info, _ in parts))
    meta["domain"] = domain
    if trace.meta.get("line_rate_Bps") is not None:
        meta["line_rate_Bps"] = float(trace.meta["line_rate_Bps"])
    return InterpModel(curves, meta)


register_trace_loader(interp_model_from_trace)
