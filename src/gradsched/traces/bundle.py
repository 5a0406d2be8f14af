"""Trace bundles: a CSV plus a ``<stem>.meta.json`` sidecar, validated on load and save.

* :class:`ComputeTrace` -- one row per gradient tensor, rows in forward (layer) order.
* :class:`CommTrace` -- one row per (collective, backend, algorithm, world size, nodes,
  in-place, message size) measurement.

Both refuse bad input with an :class:`~gradsched.errors.InputError` naming the file,
row and field. Writes are atomic.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_json, read_text, write_csv_atomic, write_json_atomic
from gradsched.limits import MAX_RANKS, MAX_SECONDS
from gradsched.traces.columns import (
    COMM_COLUMNS,
    COMM_KEY,
    COMM_SERIES,
    COMPUTE_COLUMNS,
    HOST_COLUMNS,
)
from gradsched.traces.host_bound import judgement
from gradsched.traces.validate import check_frame_values, parse_frame, read_csv_text

COMPUTE_META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "kind", "model", "batch_size", "device", "dtype", "world_size", "software",
        "capture_method", "iterations", "date", "source",
    ],
    "properties": {
        "kind": {"const": "compute"},
        "model": {"type": "string", "minLength": 1},
        "batch_size": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
        "device": {"type": "string", "minLength": 1},
        "dtype": {"type": "string", "minLength": 1},
        "world_size": {"type": "integer", "minimum": 1, "maximum": MAX_RANKS},
        "software": {"type": "object"},
        "capture_method": {"type": "string", "minLength": 1},
        "iterations": {"type": ["integer", "null"], "minimum": 1, "maximum": 2**62},
        "date": {"type": "string"},
        "source": {"type": "string", "minLength": 1},
        "iteration_s": {"type": ["number", "null"], "exclusiveMinimum": 0,
                        "maximum": MAX_SECONDS},
        "forward_backward_s": {"type": ["number", "null"], "exclusiveMinimum": 0,
                               "maximum": MAX_SECONDS},
        "notes": {"type": "string"},
    },
}

COMM_META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "source", "hardware", "statistic"],
    "properties": {
        "kind": {"const": "comm"},
        "source": {"type": "string", "minLength": 1},
        "hardware": {"type": "string", "minLength": 1},
        "interconnect": {"type": "string"},
        "software": {"type": "object"},
        "statistic": {"enum": ["mean", "median", "single"]},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "string"},
    },
}


def meta_path(csv_path: str | Path) -> Path:
    """The sidecar of ``x.csv`` is ``x.meta.json``."""
    csv_path = Path(csv_path)
    return csv_path.with_name(csv_path.stem + ".meta.json")


def _load_meta(csv_path: Path, schema: dict[str, Any]) -> dict[str, Any]:
    path = meta_path(csv_path)
    meta = read_json(path, missing="metadata sidecar is missing")
    _check_meta(meta, schema, path)
    return meta


LOAD_MEMO = 16
"""Checked traces the loads keep (the latest read): a batch of replays loads each compute
and comm trace once per case."""
_LOADED: dict[tuple[str, str, str] | None, tuple[pd.DataFrame, dict[str, Any]]] = {}


def _load_key(kind: str, path: Path) -> tuple[str, str, str] | None:
    """What makes a load the same load: the kind, the CSV's text and its sidecar's (the
    checked frame and metadata depend on nothing else; the path only names errors); None
    where either is unreadable (the load then fails as it would)."""
    try:
        return (kind, read_text(path), read_text(meta_path(path)))
    except (InputError, OSError):
        return None


def _remember(key: tuple[str, str, str] | None, frame: pd.DataFrame,
              meta: dict[str, Any]) -> None:
    if key is None:
        return
    while len(_LOADED) >= LOAD_MEMO:
        _LOADED.pop(next(iter(_LOADED)))
    _LOADED[key] = (frame.copy(), copy.deepcopy(meta))


def _copied(held: tuple[pd.DataFrame, dict[str, Any]]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A trace's own frame and metadata from those kept (callers may change theirs)."""
    return held[0].copy(), copy.deepcopy(held[1])


_VALIDATORS: dict[int, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """A checked, cached validator per schema (``jsonschema.validate`` re-checks the schema
    on every call, which dominated import time)."""
    validator = _VALIDATORS.get(id(schema))
    if validator is None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = _VALIDATORS[id(schema)] = cls(schema)
    return validator


def _non_finite(value: Any, where: str = "") -> str | None:
    """The place (``a.b[2]``) of the first NaN or infinity in a parsed JSON value."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(top level)"
    items = (value.items() if isinstance(value, dict) else
             ((f"[{i}]", v) for i, v in enumerate(value)) if isinstance(value, list) else ())
    for key, item in items:
        place = _non_finite(item, f"{where}{key}" if str(key).startswith("[")
                            else f"{where}.{key}" if where else str(key))
        if place is not None:
            return place
    return None


def _check_meta(meta: dict[str, Any], schema: dict[str, Any], path: Path | str) -> None:
    place = _non_finite(meta)  # JSON Schema's "number" takes NaN, and NaN passes maximum
    if place is not None:
        raise InputError("NaN or infinity where a finite number (or null) belongs",
                         path=path, field=place)
    exc = jsonschema.exceptions.best_match(_validator(schema).iter_errors(meta))
    if exc is not None:
        field_name = ".".join(str(p) for p in exc.absolute_path) or None
        raise InputError(exc.message, path=path, field=field_name) from None


@dataclass
class ComputeTrace:
    """Per-tensor compute profile of one (model, batch size, device, dtype)."""

    frame: pd.DataFrame
    meta: dict[str, Any]
    path: str = "<memory>"
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if "update_s" not in self.frame.columns:
            self.frame = self.frame.assign(update_s=0.0)
        self.frame = self.frame.reset_index(drop=True)

    @classmethod
    def load(cls, path: str | Path) -> ComputeTrace:
        """Load and validate ``path`` and its sidecar."""
        path = Path(path)
        key = _load_key("compute", path)
        if key in _LOADED:
            return cls(*_copied(_LOADED[key]), path=str(path))
        frame = parse_frame(read_csv_text(path), COMPUTE_COLUMNS, path)
        _check_compute_rows(frame, path)
        meta = _load_meta(path, COMPUTE_META_SCHEMA)
        _remember(key, frame, meta)
        return cls(frame=frame, meta=meta, path=str(path))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, meta: dict[str, Any]) -> ComputeTrace:
        """Build from an in-memory frame, validating it like a loaded file."""
        typed = check_frame_values(frame, COMPUTE_COLUMNS, "<memory>")
        _check_compute_rows(typed, "<memory>")
        _check_meta(meta, COMPUTE_META_SCHEMA, "<memory>")
        return cls(frame=typed, meta=dict(meta))

    def save(self, path: str | Path) -> None:
        """Validate, then write the CSV and its sidecar atomically."""
        cols = [c.name for c in COMPUTE_COLUMNS if c.name in self.frame.columns]
        typed = check_frame_values(self.frame[cols], COMPUTE_COLUMNS, path)
        _check_compute_rows(typed, path)
        _check_meta(self.meta, COMPUTE_META_SCHEMA, meta_path(path))
        write_csv_atomic(path, typed)
        write_json_atomic(meta_path(path), self.meta)

    # Convenience views used by planners and the replay (read-only numpy arrays).
    @property
    def n_tensors(self) -> int:
        return len(self.frame)

    @property
    def names(self) -> list[str]:
        return self.frame["name"].tolist()

    @property
    def stem(self) -> str:
        return Path(self.path).stem if self.path != "<memory>" else self.meta.get("model", "trace")

    @property
    def host_bound(self) -> bool | None:
        """Whether the GPU waited on the host in this trace's configuration, by the
        project's one definition (:mod:`gradsched.traces.host_bound`: the kineto-gpu
        importer's GPU busy share below 0.8); ``None`` where it was not judged. A
        host-bound model's iteration is set by the CPU's launch rate, which differs between
        machines: the same H200 configurations moved by up to -40 % / +31 % between two
        machines (``data/h200/README.md``)."""
        return judgement(self.meta)

    @property
    def compute_spread(self) -> float | None:
        """Largest over smallest forward + backward time among the processes the capture
        compared (``correction.spread.max_over_min``); ``None`` where none was measured."""
        spread = ((self.meta.get("correction") or {}).get("spread") or {}).get("max_over_min")
        return float(spread) if isinstance(spread, (int, float)) else None

    def ready_sequence(self) -> pd.DataFrame:
        """Rows sorted by ``ready_order`` with ``ready_s``: time from backward start to ready."""
        if "ready" not in self._cache:
            seq = self.frame.sort_values("ready_order", kind="stable").reset_index(drop=True)
            seq = seq.assign(ready_s=seq["backward_s"].cumsum())
            self._cache["ready"] = seq
        return self._cache["ready"]

    @property
    def forward_total_s(self) -> float:
        return float(self.frame["forward_s"].sum())

    @property
    def backward_total_s(self) -> float:
        return float(self.frame["backward_s"].sum())

    @property
    def update_total_s(self) -> float:
        return float(self.frame["update_s"].sum())

    @property
    def total_bytes(self) -> int:
        """The tensors' bytes, summed exactly (Python integers: a long trace of large
        tensors cannot wrap int64) and refused beyond :data:`MAX_TOTAL_BYTES`."""
        return checked_byte_sum(self.frame["bytes"], self.path)


MAX_TOTAL_BYTES = 2**62
"""Largest sum of bytes accepted (a model or a sweep): int64 sums of it cannot wrap."""


def checked_byte_sum(values: Any, path: str | Path) -> int:
    """The exact sum of the byte counts ``values`` (read from ``path``); a sum beyond
    :data:`MAX_TOTAL_BYTES` raises :class:`InputError` instead of wrapping int64."""
    total = sum(int(v) for v in values)
    if total > MAX_TOTAL_BYTES:
        raise InputError(f"the bytes add up to {total}, beyond {MAX_TOTAL_BYTES} (2**62): a "
                         "sum of int64 byte counts would wrap", path=path, field="bytes")
    return total


def _check_compute_rows(frame: pd.DataFrame, path: str | Path) -> None:
    names = frame["name"]
    dup = names.duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0]) + 1
        raise InputError(f"duplicate tensor name {names.iloc[row - 1]!r}", path=path, row=row,
                         line=row + 1, field="name")
    layer = frame["layer"].to_numpy()
    bad = np.flatnonzero(np.diff(layer) < 0)
    if bad.size:
        row = int(bad[0]) + 2
        raise InputError("rows must be in forward order: layer decreases here", path=path,
                         row=row, line=row + 1, field="layer")
    order = frame["ready_order"].to_numpy()
    expected = np.arange(len(frame))
    if not np.array_equal(np.sort(order), expected):
        seen: set[int] = set()
        for i, value in enumerate(order):
            if value >= len(frame) or value in seen:
                raise InputError(
                    f"ready_order must be a permutation of 0..{len(frame) - 1}; "
                    f"{value} is {'repeated' if value in seen else 'out of range'}",
                    path=path, row=i + 1, line=i + 2, field="ready_order",
                )
            seen.add(int(value))
    ratio = frame["bytes"].to_numpy() / frame["numel"].to_numpy()
    for i, r in enumerate(ratio):
        if r not in (1.0, 2.0, 4.0, 8.0):
            raise InputError(
                f"bytes/numel = {r:g} is not an element size (1, 2, 4 or 8)",
                path=path, row=i + 1, line=i + 2, field="bytes",
            )
    present = [c for c in HOST_COLUMNS if c in frame.columns]
    if present and len(present) != len(HOST_COLUMNS):
        missing = next(c for c in HOST_COLUMNS if c not in frame.columns)
        raise InputError(f"{present[0]} needs {missing} (the host columns come together)",
                         path=path, field=missing)
    for stat in ("forward", "backward"):
        lo, hi = f"{stat}_p10_s", f"{stat}_p90_s"
        if lo in frame.columns and hi in frame.columns:
            bad_rows = np.flatnonzero((frame[lo] > frame[hi]).to_numpy())
            if bad_rows.size:
                row = int(bad_rows[0]) + 1
                raise InputError(f"{lo} is larger than {hi}", path=path, row=row,
                                 line=row + 1, field=lo)


@dataclass
class CommTrace:
    """Measured collective times (one or more series of message sizes)."""

    frame: pd.DataFrame
    meta: dict[str, Any]
    path: str = "<memory>"

    def __post_init__(self) -> None:
        if "algorithm" not in self.frame.columns:
            self.frame = self.frame.assign(algorithm="default")
        self.frame = self.frame.reset_index(drop=True)

    @classmethod
    def load(cls, path: str | Path) -> CommTrace:
        """Load and validate ``path`` and its sidecar."""
        path = Path(path)
        key = _load_key("comm", path)
        if key in _LOADED:
            return cls(*_copied(_LOADED[key]), path=str(path))
        frame = parse_frame(read_csv_text(path), COMM_COLUMNS, path)
        if "algorithm" not in frame.columns:
            frame = frame.assign(algorithm="default")
        _check_comm_rows(frame, path)
        meta = _load_meta(path, COMM_META_SCHEMA)
        _remember(key, frame, meta)
        return cls(frame=frame, meta=meta, path=str(path))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, meta: dict[str, Any]) -> CommTrace:
        """Build from an in-memory frame (sorted into canonical order), validated."""
        if "algorithm" not in frame.columns:
            frame = frame.assign(algorithm="default")
        frame = canonical_comm_order(frame)
        typed = check_frame_values(frame, COMM_COLUMNS, "<memory>")
        _check_comm_rows(typed, "<memory>")
        _check_meta(meta, COMM_META_SCHEMA, "<memory>")
        return cls(frame=typed, meta=dict(meta))

    def save(self, path: str | Path) -> None:
        """Validate, then write the CSV and its sidecar atomically."""
        _check_comm_rows(self.frame, path)
        _check_meta(self.meta, COMM_META_SCHEMA, meta_path(path))
        cols = [c.name for c in COMM_COLUMNS if c.name in self.frame.columns]
        out = self.frame[cols].copy()
        out["in_place"] = out["in_place"].astype(int)
        write_csv_atomic(path, out)
        write_json_atomic(meta_path(path), self.meta)

    def series(self) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
        """Each (collective, backend, algorithm, world_size, nodes, in_place) series."""
        return [(key, grp.reset_index(drop=True))
                for key, grp in self.frame.groupby(list(COMM_SERIES), sort=True)]


def canonical_comm_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Sort comm rows by their key (the order the loader requires)."""
    return frame.sort_values(list(COMM_KEY), kind="stable").reset_index(drop=True)


def _check_comm_rows(frame: pd.DataFrame, path: str | Path) -> None:
    key = list(COMM_KEY)
    dup = frame.duplicated(subset=key)
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0]) + 1
        raise InputError("duplicate measurement key " + str(tuple(frame.loc[row - 1, key])),
                         path=path, row=row, line=row + 1, field="bytes")
    ordered = canonical_comm_order(frame)
    if not ordered[key].equals(frame[key].reset_index(drop=True)):
        rows = list(frame[key].itertuples(index=False, name=None))
        row = next((i for i in range(1, len(rows)) if rows[i] < rows[i - 1]), 0) + 1
        raise InputError(
            "rows are not sorted by (collective, backend, algorithm, world_size, nodes, "
            "in_place, bytes)", path=path, row=row, line=row + 1, field="bytes",
        )
    _check_comm_trend(frame, path)
    bad = np.flatnonzero((frame["nodes"] > frame["world_size"]).to_numpy())
    if bad.size:
        row = int(bad[0]) + 1
        raise InputError("nodes is larger than world_size", path=path, row=row, line=row + 1,
                         field="nodes")
    bad = np.flatnonzero(((frame["collective"] == "p2p")
                          & (frame["world_size"] != 2)).to_numpy())
    if bad.size:  # a p2p row is one message between two ranks (traces/columns.py)
        row = int(bad[0]) + 1
        raise InputError("a p2p row needs world_size 2 (the sending and receiving rank)",
                         path=path, row=row, line=row + 1, field="world_size")
    if "time_min_s" in frame.columns:
        bad = np.flatnonzero((frame["time_min_s"] > frame["time_s"] * (1 + 1e-9)).to_numpy())
        if bad.size:
            row = int(bad[0]) + 1
            raise InputError("time_min_s is larger than time_s", path=path, row=row,
                             line=row + 1, field="time_min_s")
    if "time_max_s" in frame.columns:
        bad = np.flatnonzero((frame["time_max_s"] < frame["time_s"] * (1 - 1e-9)).to_numpy())
        if bad.size:
            row = int(bad[0]) + 1
            raise InputError("time_max_s is smaller than time_s", path=path, row=row,
                             line=row + 1, field="time_max_s")


FALLING_SPAN = 16
"""Smallest ratio of a series' largest to smallest message for which a time that falls
over the whole range is refused (a short range may fall within measurement noise)."""

FALLING_MIN_BYTES = 2**20
"""A series is judged only if its largest message reaches this size (1 MiB): below it every
network we know is latency-bound, its times flat and at the mercy of noise."""

FALLING_FACTOR = 2.0
"""How much faster the largest message must be than the smallest before the series is
refused: a latency-bound range (4 B to 1 KiB on loopback) is flat, and on a loaded machine
its first sizes can measure slower than its last; swapped columns or mislabelled sizes
fall by orders of magnitude."""


def _check_comm_trend(frame: pd.DataFrame, path: str | Path) -> None:
    """Refuse a series whose time at its largest message is below the time at its smallest
    one by more than :data:`FALLING_FACTOR` x, over a range of at least
    :data:`FALLING_SPAN` x reaching :data:`FALLING_MIN_BYTES`: no collective gets that much
    faster with more data (noise moves a flat, latency-bound range by less; mislabelled
    sizes do not). Where the series records its fastest repetition (``time_min_s``, as
    gradsched's own sweeps do), that is compared: load on the machine only ever slows a
    repetition, so the fastest one is the least disturbed (a median of a few repetitions on a
    busy 2-core machine can rise several-fold at one size)."""
    positions = np.arange(len(frame))
    fastest = "time_min_s" in frame.columns and bool(frame["time_min_s"].notna().all())
    for _, group in frame.groupby(list(COMM_SERIES), sort=False):
        if len(group) < 2:
            continue
        nbytes = group["bytes"].to_numpy()
        times = group["time_min_s" if fastest else "time_s"].to_numpy()
        first, last = int(np.argmin(nbytes)), int(np.argmax(nbytes))
        if (nbytes[last] >= max(FALLING_SPAN * nbytes[first], FALLING_MIN_BYTES)
                and times[last] * FALLING_FACTOR < times[first]):
            row = int(positions[group.index[last]]) + 1
            raise InputError(
                f"time falls as the message grows over the whole series"
                f"{' (fastest repetitions)' if fastest else ''}: "
                f"{times[first]:.6g} s at {nbytes[first]} bytes, {times[last]:.6g} s at "
                f"{nbytes[last]} bytes (a collective does not get faster with more data: "
                "are the columns swapped or the sizes mislabelled?)",
                path=path, row=row, line=row + 1,
                field="time_min_s" if fastest else "time_s")
