"""The communication cost-model interface and the ``--comm`` spec every command accepts.

A model answers ``time(collective, bytes, world_size) -> seconds``. Models serialise to
JSON (``{"kind": ..., ...}``) and are looked up by ``kind`` in a registry, so a new
model is one new module that calls :func:`register_model` and that
``gradsched/costmodel/__init__.py`` imports.

``--comm`` accepts
* a comm-trace CSV (``*.csv``): monotone interpolation of the measurements,
* a fitted model JSON (``*.json``) written by ``gradsched fit``,
* an inline ``alpha-beta:alpha=<s>,beta=<s per byte>`` model.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from gradsched.costmodel.domain import (
    BASIS_EXTRAPOLATED,
    BASIS_MEASURED,
    BASIS_UNKNOWN,
    DERIVED,
    CollectiveBasis,
)
from gradsched.costmodel.wire import floor_startup, ring_algbw_limit, sustained_algbw
from gradsched.errors import ConfigError, GradschedError, InputError
from gradsched.io import read_json, write_json_atomic
from gradsched.limits import MAX_SECONDS
from gradsched.traces.columns import COLLECTIVES

# Ring algorithms move half of an all-reduce's data in a reduce-scatter or an all-gather
# ((P-1) steps of M/P bytes instead of 2(P-1)); without measurements of those collectives a
# model derives them from all-reduce with this factor (Thakur, Rabenseifner & Gropp 2005).
DERIVED_FROM_ALL_REDUCE: dict[str, float] = {
    "all_reduce": 1.0,
    "reduce_scatter": 0.5,
    "all_gather": 0.5,
    "broadcast": 0.5,
    "reduce": 0.5,
    # one point-to-point message of M bytes crosses one link once, as much per link as a ring
    # all-reduce of M bytes on 2 ranks (2(P-1)/P = 1): f = 1
    "p2p": 1.0,
}


PLAN_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
"""The collectives a plan's buckets launch (all-reduce, or DeAR's reduce-scatter + all-gather)."""


def comm_times(model: CommModel, collective: str, nbytes: np.ndarray,
               world_size: int) -> np.ndarray:
    """Seconds of each message of ``nbytes`` under ``model``; one rank communicates nothing
    (the convention of the replay and of every planner that prices a bucket)."""
    nbytes = np.asarray(nbytes, dtype=float)
    if world_size <= 1:
        return np.zeros_like(nbytes)
    return np.asarray(model.times(collective, nbytes, world_size), dtype=float)


class CommModel(ABC):
    """Predicts the time of one collective of ``nbytes`` bytes per rank on ``world_size`` ranks.

    Subclasses implement :meth:`raw_times`; :meth:`times` clips it to the wire floor of
    :mod:`gradsched.costmodel.wire` (no message faster than the sustained bandwidth), so
    every model kind is physically consistent. A composite model whose parts are already
    floored and that legitimately moves fewer bytes (gradient compression) sets
    ``wire_floor_applies = False``.
    """

    kind: ClassVar[str] = ""
    wire_floor_applies: ClassVar[bool] = True

    @abstractmethod
    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        """The model's own vectorised prediction (seconds), before the wire floor."""

    def times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        """Vectorised prediction (seconds) for an array of message sizes (bytes), never
        below ``startup + f_c * nbytes / sustained_algbw`` (:mod:`.wire`)."""
        raw = self.raw_times(collective, nbytes, world_size)
        if not self.wire_floor_applies or world_size <= 1:
            return raw
        startup, s_per_byte = self.wire_floor(collective, world_size)
        if s_per_byte == 0.0:
            return raw
        return np.maximum(raw, startup + s_per_byte * np.asarray(nbytes, dtype=float))

    def time(self, collective: str, nbytes: float, world_size: int) -> float:
        """Prediction (seconds) for one message size."""
        return float(self.times(collective, np.asarray([nbytes], dtype=float), world_size)[0])

    def _wire_cache(self) -> dict[Any, Any]:
        return self.__dict__.setdefault("_wire_memo", {})

    def reference_bytes(self, world_size: int) -> float:
        """The largest message size the model describes from data (default 64 MiB); the
        sustained bandwidth is read among sizes within a factor of 64 of it."""
        return float(2**26)

    def line_rate_Bps(self) -> float | None:
        """The per-rank link rate (bytes/s) where the measured network's is known."""
        return None

    def startup_s(self, collective: str, world_size: int) -> float:
        """The start-up (latency) part of every collective: the time that does not depend
        on the message size. The replay lets start-ups of concurrent collectives overlap and
        makes only the rest share bandwidth. Default: the model's smallest time at any size
        from 0 up to :meth:`reference_bytes` (its intercept when it is monotone)."""
        key = ("startup", collective, int(world_size))
        memo = self._wire_cache()
        if key not in memo:
            grid = np.concatenate([[0.0], np.geomspace(1.0, self.reference_bytes(world_size), 64)])
            memo[key] = max(float(np.min(self.raw_times(collective, grid, world_size))), 0.0)
        return memo[key]

    def sustained_algbw_Bps(self, world_size: int) -> float:
        """The sustained all-reduce algorithm bandwidth (bytes/s) at ``world_size``: the
        largest rate among large messages of the collectives a plan uses (all-reduce,
        reduce-scatter and all-gather, each normalised by its share of an all-reduce's
        traffic), capped at the line rate (:mod:`.wire`)."""
        key = ("algbw", int(world_size))
        memo = self._wire_cache()
        if key not in memo:
            ref = self.reference_bytes(world_size)
            grid = np.geomspace(ref / 64.0, ref, 33)
            rate = max(
                sustained_algbw(grid, self.raw_times(c, grid, world_size),
                                self.startup_s(c, world_size), DERIVED_FROM_ALL_REDUCE[c])
                for c in PLAN_COLLECTIVES)
            line = self.line_rate_Bps()
            if line is not None:
                rate = min(rate, ring_algbw_limit(line, world_size))
            memo[key] = rate
        return memo[key]

    def wire_floor(self, collective: str, world_size: int) -> tuple[float, float]:
        """(start-up s, seconds per byte) of the floor ``s + f_c * m / b`` of ``collective``.
        The start-up is :meth:`startup_s`, lowered by :func:`.wire.floor_startup` where the
        smallest measured size already spends a material part of its time on the wire (a
        sweep that begins in the bandwidth regime)."""
        key = ("floor", collective, int(world_size))
        memo = self._wire_cache()
        if key not in memo:
            check_collective(collective)
            rate = self.sustained_algbw_Bps(world_size)
            per_byte = DERIVED_FROM_ALL_REDUCE[collective] / rate if np.isfinite(rate) else 0.0
            startup = self.startup_s(collective, world_size)
            measured = self.measured_bytes(collective, world_size)
            if measured is not None and per_byte > 0.0:
                grid = np.geomspace(measured[0], max(measured[1], measured[0]), 64)
                startup = floor_startup(grid, self.raw_times(collective, grid, world_size),
                                        startup, per_byte)
            memo[key] = (startup, per_byte)
        return memo[key]

    def measured_bytes(self, collective: str, world_size: int) -> tuple[float, float] | None:
        """(smallest, largest) message size measured for the curve that answers
        ``collective`` at ``world_size`` (:mod:`.domain`); ``None`` where the model does not
        record what it was measured on (an inline alpha-beta line, a formula)."""
        return None

    def world_size_basis(self, world_size: int) -> str:
        """Whether ``world_size`` was measured (``"measured"``), predicted by a formula from
        other world sizes (``"extrapolated"``) or is not known (``"unknown"``): from
        :meth:`fit_world_sizes` (unknown where the model records none)."""
        fitted = self.fit_world_sizes()
        if fitted is None:
            return BASIS_UNKNOWN
        return BASIS_MEASURED if int(world_size) in fitted else BASIS_EXTRAPOLATED

    def fit_world_sizes(self) -> tuple[int, ...] | None:
        """The world sizes the model was measured (fitted) at; ``None`` where it does not
        record them (an inline alpha-beta line, a formula with made-up parameters)."""
        return None

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """How ``collective`` is priced at ``world_size``: one record per part of the
        model (:class:`~gradsched.costmodel.domain.CollectiveBasis`): measured, derived
        from another collective's measurements, or unknown (the default)."""
        return (CollectiveBasis(collective, BASIS_UNKNOWN),)

    def extrapolation(self) -> dict[str, Any] | None:
        """The model's measured cross-world-size error (``meta["extrapolation"]``:
        ``fit_world_sizes``, ``validated_world_sizes``, ``median_ape_pct``,
        ``max_ape_pct``, written by ``gradsched fit --cross-world-size``); ``None`` where
        it records none."""
        record = (getattr(self, "meta", None) or {}).get("extrapolation")
        return dict(record) if isinstance(record, dict) else None

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description, including ``kind``."""

    @classmethod
    @abstractmethod
    def from_dict(cls, data: dict[str, Any]) -> CommModel:
        """Inverse of :meth:`to_dict`."""

    def world_sizes(self) -> tuple[int, ...] | None:
        """World sizes the model holds measurements for; ``None`` = it predicts any."""
        return None

    def describe(self) -> str:
        """One line for humans."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def save(self, path: str | Path) -> None:
        """Write the model JSON atomically."""
        write_json_atomic(path, self.to_dict())


# Filled by each model module as it is imported. The package ``gradsched.costmodel``
# imports every built-in model module at its top, and Python runs a package's
# ``__init__`` before any of its submodules, so the registry is complete wherever this
# module can be imported from outside the package.
_REGISTRY: dict[str, type[CommModel]] = {}


def register_model(cls: type[CommModel]) -> type[CommModel]:
    """Class decorator: make ``cls`` loadable by its ``kind``."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no kind")
    _REGISTRY[cls.kind] = cls
    return cls


def model_from_dict(data: dict[str, Any], source: str = "<dict>") -> CommModel:
    """Rebuild a model from its JSON description."""
    kind = data.get("kind")
    if kind not in _REGISTRY:
        raise InputError(f"unknown model kind {kind!r}; known: {', '.join(sorted(_REGISTRY))}",
                         path=source, field="kind")
    try:
        model = _REGISTRY[kind].from_dict(data)
    except InputError as exc:
        if exc.path is not None:
            raise
        raise InputError(exc.reason, path=source, field=exc.field) from None
    except KeyError as exc:  # name the key that is missing, not just "KeyError"
        raise InputError(f"malformed {kind} model: no key {exc} (KeyError: {exc})",
                         path=source, field=str(exc.args[0]) if exc.args else None) from None
    except (ConfigError, TypeError, ValueError, AttributeError) as exc:
        # a missing key, a string or null where a number belongs: one line naming the file
        raise InputError(f"malformed {kind} model: {type(exc).__name__}: {exc}",
                         path=source) from None
    check_model_range(model, source)
    return model


def check_model_range(model: CommModel, source: str = "<model>") -> None:
    """Refuse a model whose all-reduce of 1 byte or of 1 GiB takes a non-finite time or
    more than :data:`~gradsched.limits.MAX_SECONDS` at a world size it holds
    (without this check an alpha of 1e300 s is accepted and overflows the replay's sums)."""
    for world_size in model.world_sizes() or (2,):
        for nbytes in (1.0, float(2**30)):
            try:
                seconds = model.time("all_reduce", nbytes, world_size)
            except GradschedError:
                break  # the model holds no all-reduce at this world size
            if not 0 <= seconds <= MAX_SECONDS:  # NaN fails too
                raise InputError(f"predicts {seconds!r} s for an all-reduce of {nbytes:.0f} "
                                 f"bytes at world size {world_size}: outside [0, "
                                 f"{MAX_SECONDS:g}] s", path=source)


def check_collective(collective: str) -> None:
    """Reject a collective name gradsched does not know."""
    if collective not in COLLECTIVES:
        raise ConfigError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")


@register_model
class AlphaBetaModel(CommModel):
    """T(M) = alpha + beta * M for all-reduce (Hockney's model, as in MG-WFBP's Eq. 1).

    Other collectives are derived with :data:`DERIVED_FROM_ALL_REDUCE` unless given
    explicitly in ``per_collective`` as ``{name: (alpha, beta)}``. The world size does not
    enter: the parameters describe one cluster size.
    """

    kind = "alpha-beta"

    def __init__(
        self,
        alpha: float,
        beta: float,
        per_collective: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        if not (np.isfinite(alpha) and 0 <= alpha <= MAX_SECONDS):
            raise ConfigError(f"alpha must be a finite number in [0, {MAX_SECONDS:g}] seconds, "
                              f"got {alpha}")
        if not (np.isfinite(beta) and 0 <= beta <= 1.0):
            raise ConfigError(f"beta must be a finite number in [0, 1] seconds/byte, got {beta}")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.per_collective = {k: (float(a), float(b))
                               for k, (a, b) in (per_collective or {}).items()}
        for name in self.per_collective:
            check_collective(name)

    def params(self, collective: str) -> tuple[float, float]:
        """(alpha, beta) of ``collective``."""
        check_collective(collective)
        if collective in self.per_collective:
            return self.per_collective[collective]
        factor = DERIVED_FROM_ALL_REDUCE[collective]
        return self.alpha * factor, self.beta * factor

    def startup_s(self, collective: str, world_size: int) -> float:
        return self.params(collective)[0]

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """The line describes an all-reduce; another collective not given in
        ``per_collective`` is derived from it (:data:`DERIVED_FROM_ALL_REDUCE`)."""
        check_collective(collective)
        if collective == "all_reduce" or collective in self.per_collective:
            return (CollectiveBasis(collective, BASIS_UNKNOWN),)
        return (CollectiveBasis(collective, DERIVED, "all_reduce"),)

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        alpha, beta = self.params(collective)
        return alpha + beta * np.asarray(nbytes, dtype=float)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind, "alpha_s": self.alpha, "beta_s_per_byte": self.beta,
        }
        if self.per_collective:
            out["per_collective"] = {k: {"alpha_s": a, "beta_s_per_byte": b}
                                     for k, (a, b) in sorted(self.per_collective.items())}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlphaBetaModel:
        per = {k: (v["alpha_s"], v["beta_s_per_byte"])
               for k, v in data.get("per_collective", {}).items()}
        return cls(data["alpha_s"], data["beta_s_per_byte"], per)


def parse_inline_alpha_beta(spec: str) -> AlphaBetaModel:
    """Parse ``alpha-beta:alpha=<s>,beta=<s/byte>``."""
    body = spec.split(":", 1)[1] if ":" in spec else ""
    values: dict[str, float] = {}
    for part in filter(None, body.split(",")):
        if "=" not in part:
            raise ConfigError(f"--comm {spec!r}: expected key=value, got {part!r}")
        key, text = part.split("=", 1)
        key = key.strip()
        if key not in ("alpha", "beta"):
            raise ConfigError(f"--comm {spec!r}: unknown parameter {key!r} (use alpha, beta)")
        try:
            values[key] = float(text)
        except ValueError:
            raise ConfigError(f"--comm {spec!r}: {key}={text!r} is not a number") from None
    missing = {"alpha", "beta"} - set(values)
    if missing:
        raise ConfigError(f"--comm {spec!r}: missing {', '.join(sorted(missing))}; "
                          "write alpha-beta:alpha=<seconds>,beta=<seconds per byte>")
    return AlphaBetaModel(values["alpha"], values["beta"])


# Loaders for spec forms implemented in other modules (set by those modules on import).
_TRACE_LOADER: list[Callable[[Path], CommModel]] = []


def register_trace_loader(loader: Callable[[Path], CommModel]) -> None:
    """Set the function that turns a comm-trace CSV into a model (interpolation)."""
    _TRACE_LOADER[:] = [loader]


def load_comm_spec(spec: str | Path) -> CommModel:
    """Turn a ``--comm`` spec (or a path to a trace or model file) into a model (see module
    docstring)."""
    spec = str(spec)
    if spec.startswith("alpha-beta:"):
        return parse_inline_alpha_beta(spec)
    path = Path(spec)
    if path.suffix == ".json":
        data = read_json(path, missing="model file not found")
        return model_from_dict(data, source=str(path))
    if path.suffix == ".csv":
        if not _TRACE_LOADER:
            raise ConfigError("no comm-trace loader is registered")
        return _TRACE_LOADER[0](path)
    if path.is_dir():
        raise InputError("a folder: --comm takes a comm trace (.csv), a model (.json) or "
                         "alpha-beta:alpha=<seconds>,beta=<seconds per byte>", path=path)
    raise ConfigError(
        f"--comm {spec!r}: expected a comm trace (.csv), a model (.json) or "
        "alpha-beta:alpha=<seconds>,beta=<seconds per byte>"
    )
