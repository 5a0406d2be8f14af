"""Stragglers: a synchronising collective starts when the slowest of P ranks reaches it.

The model. Rank ``i``'s compute up to a synchronisation point is ``T_i = mu (1 + cv Z_i)``
with ``Z_i`` independent standard normals; the collective starts, in expectation, at

    E[max_i T_i] = mu (1 + cv e_P),     e_P = E[max of P standard normals]
                 = integral of x P phi(x) Phi(x)^(P-1) dx

(the density of the largest of P order statistics, ``f_(P:P)(x) = P F(x)^(P-1) f(x)``,
H. A. David and H. N. Nagaraja, *Order Statistics*, 3rd ed., Wiley 2003, eq. (2.1.3) with
r = n; expected values tabulated by H. L. Harter, "Expected values of normal order
statistics", Biometrika 48, 1961: e_2 = 0.5642, e_4 = 1.0294, e_8 = 1.4236,
e_100 = 2.5076, e_1000 = 3.2414). For large P, ``e_P`` approaches ``sqrt(2 ln P)`` from
below, slowly (3.25 against 3.72 at P = 1,024), so the asymptote is not used.

Which sigma. A rank that is slower is slower on every layer (the variation measured is
mostly between processes: ``gradsched study stragglers``), so the slowest rank at one
synchronisation point is the slowest at every point, and ``E[max_i t (1 + cv Z_i)] =
t (1 + cv e_P)`` at every point ``t`` of the step. Stretching every compute time of the
trace by ``1 + cv e_P`` therefore puts each synchronisation where its expected maximum is,
whatever the synchronisation structure: DDP's (the ranks' compute streams meet only at
the step's end, where the optimizer waits for the last all-reduce: one synchronisation per
step) and FSDP's (every all-gather of a unit synchronises the ranks before that unit
computes). ``cv`` is therefore the per-step coefficient of variation. Independent jitter
per synchronisation interval would stretch a step with many intervals more, but only where
it outruns the slack the prefetched collective leaves the unit; the at-scale study measures
that jitter on GPU kernels and prices it where it binds
(:mod:`gradsched.experiments.at_scale.sync`, :mod:`gradsched.experiments.at_scale.unit_jitter`).

:class:`Stragglers` is the setting (frozen, checked once); :func:`apply_stragglers` the
transform of a compute trace before any replay (DDP or sharded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from gradsched.costmodel.overlap_slowdown import is_gpu_trace
from gradsched.errors import ConfigError
from gradsched.limits import MAX_RANKS
from gradsched.traces.bundle import ComputeTrace

MAX_CV = 0.5
"""Largest coefficient of variation accepted: beyond it a normal model gives ranks negative
compute times with a probability that is no longer negligible (2.3 % at cv = 0.5)."""

STRETCHED_COLUMNS = ("forward_s", "backward_s", "update_s", "forward_p10_s", "forward_p90_s",
                     "backward_p10_s", "backward_p90_s", "host_forward_s", "host_backward_s")
"""The compute times a straggler setting stretches (every time column of a compute trace;
launch counts and bytes are left as they are)."""

DeviceClass = Literal["gpu-bound", "host-bound"]


@dataclass(frozen=True)
class MeasuredCv:
    """The per-step cv of one device class, measured (``gradsched study stragglers``)."""

    cv: float
    source: str


MEASURED: dict[str, MeasuredCv] = {
    "gpu-bound": MeasuredCv(0.035, "14 H200 configurations, between processes and "
                            "iterations (gradsched study stragglers)"),
    "host-bound": MeasuredCv(0.201, "4 H200 configurations, between processes and "
                             "iterations (gradsched study stragglers)"),
}
"""The ``auto`` values, rounded to three decimals from ``gradsched study stragglers`` on the
committed H200 data (``tests/experiments/test_stragglers_study.py`` recomputes them)."""


@dataclass(frozen=True)
class Stragglers:
    """One straggler setting: the per-step coefficient of variation of a rank's compute
    (sigma / mu), where it comes from, and the distribution of the ranks' deviations."""

    cv: float
    source: str
    distribution: Literal["normal"] = "normal"

    def __post_init__(self) -> None:
        if not (0.0 <= self.cv <= MAX_CV) or math.isnan(self.cv):
            raise ConfigError(f"straggler cv {self.cv!r} is outside [0, {MAX_CV}]")
        if self.distribution != "normal":
            raise ConfigError(f"straggler distribution {self.distribution!r}: only 'normal'")

    def factor(self, world: int) -> float:
        """Expected compute of the slowest of ``world`` ranks over a rank's mean."""
        return 1.0 + self.cv * expected_max_normal(world)

    def to_dict(self, world: int) -> dict[str, object]:
        return {"cv": self.cv, "source": self.source, "distribution": self.distribution,
                "world_size": world, "e_P": round(expected_max_normal(world), 6),
                "factor": round(self.factor(world), 6)}


@lru_cache(maxsize=256)
def expected_max_normal(p: int) -> float:
    """``e_P``: the expected largest of ``p`` independent standard normals, by numerical
    integration of the order-statistic density (module docstring; absolute error below
    1e-9 against Harter's table)."""
    if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= MAX_RANKS:
        raise ConfigError(f"number of ranks {p!r} is not an integer in [1, {MAX_RANKS}]")
    if p == 1:
        return 0.0
    # imported here, not at the top: stragglers are off by default, and every replay imports
    # this module
    from scipy import integrate, special

    def density_times_x(x: float) -> float:
        return float(x * p * math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
                     * np.exp((p - 1) * special.log_ndtr(x)))

    peak = math.sqrt(2.0 * math.log(p))
    value, _ = integrate.quad(density_times_x, -40.0, 40.0, points=[peak], limit=400,
                              epsabs=1e-13, epsrel=1e-12)
    return float(value)


def device_class(trace: ComputeTrace) -> tuple[DeviceClass | None, str]:
    """The trace's measured class and the rule that decided it: ``None`` for a CPU trace
    (no straggler measurement); ``host-bound`` or ``gpu-bound`` by the project's one
    definition (:attr:`ComputeTrace.host_bound`, :mod:`gradsched.traces.host_bound`: the
    kineto-gpu importer's GPU busy share below 0.8); ``gpu-bound`` where the trace was not
    judged (a published profile with no GPU timeline), and the rule says so."""
    if not is_gpu_trace(trace.meta):
        return None, f"device {trace.meta.get('device')!r}"
    if trace.host_bound is not None:
        return ("host-bound" if trace.host_bound else "gpu-bound"), "gradsched.traces.host_bound"
    return "gpu-bound", "not judged (no GPU busy share measured): taken as GPU-bound"


def parse_stragglers(value: str) -> str | float:
    """``off``, ``auto`` or a cv in [0, MAX_CV]; anything else refused in one line."""
    text = value.strip().lower()
    if text in ("off", "auto"):
        return text
    try:
        cv = float(text)
    except ValueError:
        cv = math.nan
    if math.isnan(cv) or not 0.0 <= cv <= MAX_CV:
        raise ConfigError(f"--stragglers {value!r}: expected off, auto or a coefficient of "
                          f"variation in [0, {MAX_CV}] (e.g. 0.02)")
    return cv


def resolve_stragglers(choice: str | float, trace: ComputeTrace,
                       world: int) -> Stragglers | None:
    """The setting ``--stragglers`` asks for on ``trace`` at ``world`` ranks; ``None`` for
    ``off``. A setting that would change nothing is refused: one rank, or ``auto`` on a
    trace whose device class has no measurement."""
    if choice == "off":
        return None
    if world == 1:
        raise ConfigError("--stragglers: with one rank there is no slower rank to wait for "
                          "(give --stragglers off or more ranks)")
    if choice == "auto":
        cls, why = device_class(trace)
        if cls is None:
            raise ConfigError(f"--stragglers auto: no straggler measurement for a "
                              f"'{trace.meta.get('device')}' trace (only GPU classes were "
                              "measured); give a cv, e.g. --stragglers 0.02")
        measured = MEASURED[cls]
        return Stragglers(measured.cv, f"auto, {cls} ({why}): {measured.source}")
    return Stragglers(float(choice), "given on the command line")


def apply_stragglers(trace: ComputeTrace, stragglers: Stragglers | None,
                     world: int) -> ComputeTrace:
    """``trace`` with every compute time stretched to the expected slowest of ``world``
    ranks (module docstring); the same object when nothing would change (no setting,
    ``cv == 0`` or one rank), so a replay stays byte-identical. The setting is recorded in
    the returned trace's meta under ``stragglers``."""
    if stragglers is None or stragglers.cv == 0.0 or world == 1:
        return trace
    factor = stragglers.factor(world)
    frame = trace.frame.copy()
    for column in STRETCHED_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column] * factor
    meta = dict(trace.meta) | {"stragglers": stragglers.to_dict(world)}
    return ComputeTrace(frame=frame, meta=meta, path=trace.path)


def note(stragglers: Stragglers, world: int) -> str:
    """One line saying what was applied."""
    return (f"stragglers: compute stretched x{stragglers.factor(world):.4f} = 1 + cv "
            f"{stragglers.cv:g} x e_P {expected_max_normal(world):.4f} (expected slowest of "
            f"{world} ranks, {stragglers.distribution}; {stragglers.source})")
