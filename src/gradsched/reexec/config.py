"""The re-execution's configuration: its cases, its settings and the interference JSON
each case's plans and predictions use (``config/reexec.yaml``; the experiment itself is
:mod:`gradsched.reexec.experiment`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError, ConfigFileError, InputError
from gradsched.experiments.grid import expand_algorithms
from gradsched.io import read_json, read_yaml
from gradsched.limits import MAX_RANKS, MAX_REPLAY_ITERATIONS, MAX_SECONDS, in_range, is_real
from gradsched.names import plain_name, registry_model
from gradsched.networks import NETWORKS, tc_rate
from gradsched.planners import WFBP_FAMILY
from gradsched.replay.engine import MAX_SLOWDOWN

# --------------------------------------------------------------------------- cases
ALGORITHMS: tuple[str, ...] = ("wfbp", "syncsgd", "ddp", "horovod", "mgwfbp", "oasr", "dear",
                               "bytescheduler", "best")


@dataclass(frozen=True)
class Case:
    """One (model, batch size, world size, network) setting."""

    name: str
    model: str
    batch_size: int
    world_size: int
    network: str
    compute: str  # compute trace CSV
    comm: str  # comm trace CSV (one world size) or fitted model JSON
    seq_len: int | None = None

    @property
    def rate(self) -> str | None:
        """The ``tc`` rate of the emulated cluster, or None for loopback."""
        return tc_rate(self.network)


@dataclass(frozen=True)
class Settings:
    """How every case is measured and predicted."""

    algorithms: tuple[str, ...] = ALGORITHMS
    # None: DDP constructed without bucket_cap_mb (what a user gets: 25 MiB, 1 MiB first)
    ddp_bucket_cap_mb: tuple[float | None, ...] = (None, 25.0, 1.0)
    # planners whose plan stock DDP also runs, with bucket_cap_mb_list set to that plan's
    # buckets (gradsched.planners.ddp_caps; item ddp-list-<planner>)
    ddp_bucket_cap_mb_list_from: tuple[str, ...] = ()
    knobs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    warmup: int = 1
    iters: int = 3
    rounds: int = 2
    threads: int = 1
    backend: str = "gloo"
    seed: int = 0
    timeout_s: float = 600.0
    replay_iterations: int = 5
    allow_load: bool = False  # measure although other work uses the machine (flagged)

    def __post_init__(self) -> None:
        if self.iters < 1 or self.warmup < 0 or self.rounds < 1:
            raise ConfigError("reexec: iters >= 1, warmup >= 0 and rounds >= 1 are required")
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError(f"reexec: backend must be gloo or nccl, not {self.backend!r}")
        for cap in self.ddp_bucket_cap_mb:
            if cap is not None and not 0 < cap < math.inf:
                raise ConfigError(f"reexec: ddp_bucket_cap_mb must be > 0, got {cap}")
        for name in self.ddp_bucket_cap_mb_list_from:
            if name not in WFBP_FAMILY:
                raise ConfigError(f"reexec: ddp_bucket_cap_mb_list_from: {name!r} does not "
                                  "make contiguous all-reduce plans that stock DDP can run; "
                                  f"one of {', '.join(WFBP_FAMILY)}")
        if self.ddp_bucket_cap_mb_list_from and self.warmup < 1:
            raise ConfigError("reexec: ddp_bucket_cap_mb_list_from needs warmup >= 1 (DDP "
                              "rebuilds its buckets after the first iteration)")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["algorithms"] = list(self.algorithms)
        out["ddp_bucket_cap_mb"] = list(self.ddp_bucket_cap_mb)
        out["ddp_bucket_cap_mb_list_from"] = list(self.ddp_bucket_cap_mb_list_from)
        out["knobs"] = {k: dict(v) for k, v in self.knobs.items()}
        return out


_CASE_KEYS = {"name", "model", "batch_size", "world_size", "network", "compute", "comm",
              "seq_len"}


_SETTING_KEYS = {f for f in Settings.__dataclass_fields__}

def load_config(path: str | Path) -> tuple[list[Case], Settings]:
    """Read ``config/reexec.yaml`` (mapping ``reexec`` with ``settings`` and ``cases``)."""
    path = Path(path)
    data = read_yaml(path, missing="config file not found")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigFileError("expected a mapping 'reexec'", path=path)
    spec = data.get("reexec", data)
    if not isinstance(spec, dict):
        raise ConfigFileError("expected a mapping 'reexec'", path=path)
    raw_settings = spec.get("settings")
    settings = parse_settings({} if raw_settings is None else raw_settings, path)
    cases = spec.get("cases")
    if cases is None or cases == []:  # an empty file or a misspelt key: nothing would run
        raise ConfigFileError("no cases: expected reexec: {settings: ..., cases: [...]}",
                              path=path, field="reexec.cases")
    return parse_cases(cases, path), settings


def _cap(value: Any, where: str | Path) -> float | None:
    """A ``ddp_bucket_cap_mb`` entry: a number of MiB, or ``default`` (None)."""
    if value is None or value == "default":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigFileError(f"ddp_bucket_cap_mb entries are MiB or 'default', got {value!r}",
                         path=where, field="settings.ddp_bucket_cap_mb")
    return float(value)


_SETTING_INTS: dict[str, tuple[int, int]] = {
    "warmup": (0, MAX_REPLAY_ITERATIONS), "iters": (1, MAX_REPLAY_ITERATIONS),
    "rounds": (1, MAX_REPLAY_ITERATIONS), "threads": (1, 4096), "seed": (0, 2**32 - 1),
    "replay_iterations": (2, MAX_REPLAY_ITERATIONS)}
"""Integer settings and their accepted ranges."""


def _integer(value: Any, low: int, high: int, where: str | Path, name: str) -> int:
    """``value`` as an integer in ``[low, high]`` (not a bool, a float or a string)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigFileError(f"needs an integer in [{low}, {high}], got {value!r}", path=where,
                         field=name)
    return value


def _text(value: Any, where: str | Path, name: str) -> str:
    """``value`` as a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ConfigFileError(f"needs a non-empty string, got {value!r}", path=where, field=name)
    return value


def _string_list(value: Any, where: str | Path, name: str) -> tuple[str, ...]:
    """``value`` as a list of strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigFileError(f"needs a list of names, got {value!r}", path=where, field=name)
    return tuple(value)


def parse_settings(raw: Mapping[str, Any], where: str | Path = "<config>") -> Settings:
    """``settings:`` mapping -> :class:`Settings`; unknown keys and values of the wrong
    type or range are refused naming the file and ``settings.<key>``."""
    if not isinstance(raw, Mapping):
        raise ConfigFileError(f"needs a mapping, got {raw!r}", path=where, field="settings")
    unknown = set(raw) - _SETTING_KEYS
    if unknown:
        raise ConfigFileError(f"unknown settings key(s) {sorted(unknown)}; known: "
                         f"{sorted(_SETTING_KEYS)}", path=where, field="settings")
    values = dict(raw)
    for key, (low, high) in _SETTING_INTS.items():
        if key in values:
            values[key] = _integer(values[key], low, high, where, f"settings.{key}")
    if "algorithms" in values:
        values["algorithms"] = _string_list(values["algorithms"], where,
                                            "settings.algorithms")
        try:
            expand_algorithms(list(values["algorithms"]))
        except ConfigError as exc:
            raise ConfigFileError(str(exc), path=where, field="settings.algorithms") from None
    if "ddp_bucket_cap_mb_list_from" in values:
        values["ddp_bucket_cap_mb_list_from"] = _string_list(
            values["ddp_bucket_cap_mb_list_from"], where, "settings.ddp_bucket_cap_mb_list_from")
        try:
            Settings(ddp_bucket_cap_mb_list_from=values["ddp_bucket_cap_mb_list_from"])
        except ConfigError as exc:
            raise ConfigFileError(str(exc), path=where,
                                  field="settings.ddp_bucket_cap_mb_list_from") from None
    if "ddp_bucket_cap_mb" in values:
        caps = values["ddp_bucket_cap_mb"]
        if not isinstance(caps, list):
            raise ConfigFileError(f"needs a list of MiB or 'default', got {caps!r}", path=where,
                             field="settings.ddp_bucket_cap_mb")
        values["ddp_bucket_cap_mb"] = tuple(_cap(v, where) for v in caps)
    if "knobs" in values and not (isinstance(values["knobs"], Mapping) and all(
            isinstance(v, Mapping) for v in values["knobs"].values())):
        raise ConfigFileError("needs a mapping planner -> {knob: value}, got "
                         f"{values['knobs']!r}", path=where, field="settings.knobs")
    if "backend" in values:
        values["backend"] = _text(values["backend"], where, "settings.backend")
    timeout = values.get("timeout_s", 1.0)
    if not is_real(timeout) or not in_range(timeout, 0.0, MAX_SECONDS, low_open=True):
        raise ConfigFileError(f"needs a number of seconds in (0, {MAX_SECONDS:g}], got "
                         f"{timeout!r}", path=where, field="settings.timeout_s")
    if not isinstance(values.get("allow_load", False), bool):
        raise ConfigFileError(f"needs true or false, got {values['allow_load']!r}", path=where,
                         field="settings.allow_load")
    try:
        return Settings(**values)
    except ConfigError as exc:
        raise ConfigFileError(str(exc), path=where, field="settings") from None


def parse_cases(raw: Sequence[Mapping[str, Any]], where: str | Path = "<config>") -> list[Case]:
    """``cases:`` list -> :class:`Case` objects; ``comm`` defaults to the committed sweep."""
    if not isinstance(raw, list):
        raise ConfigFileError(f"needs a list of cases, got {raw!r}", path=where, field="cases")
    cases = []
    names: set[str] = set()
    for i, entry in enumerate(raw):
        at = f"cases[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigFileError(f"a case is a mapping, got {entry!r}", path=where, field=at)
        unknown = set(entry) - _CASE_KEYS
        if unknown:
            raise ConfigFileError(f"unknown key(s) {sorted(unknown)}", path=where, field=at)
        for key in ("model", "batch_size", "world_size", "network", "compute"):
            if key not in entry:
                raise ConfigFileError(f"missing {key!r}", path=where, field=at)
        network = _text(entry["network"], where, f"{at}.network")
        if network not in NETWORKS:
            raise ConfigFileError(f"network must be one of {sorted(NETWORKS)}, not {network!r}",
                             path=where, field=f"{at}.network")
        world = _integer(entry["world_size"], 2, MAX_RANKS, where, f"{at}.world_size")
        batch = _integer(entry["batch_size"], 1, 2**31 - 1, where, f"{at}.batch_size")
        model = registry_model(_text(entry["model"], where, f"{at}.model"), path=where,
                               field=f"{at}.model")
        compute = _text(entry["compute"], where, f"{at}.compute")
        comm = entry.get("comm") or f"traces/comm/cpu/gloo-{network}-p{world}.csv"
        comm = _text(comm, where, f"{at}.comm")
        name = plain_name(_text(entry.get("name") or f"{model}-b{batch}-p{world}-{network}",
                                where, f"{at}.name"), path=where, field=f"{at}.name")
        seq_len = entry.get("seq_len")
        if seq_len is not None:
            seq_len = _integer(seq_len, 1, 2**31 - 1, where, f"{at}.seq_len")
        if name in names:
            raise ConfigFileError(f"a second case named {name!r}", path=where, field=f"{at}.name")
        names.add(name)
        cases.append(Case(name=name, model=model, batch_size=batch, world_size=world,
                          network=network, compute=compute, comm=comm, seq_len=seq_len))
    return cases


def select_cases(cases: Sequence[Case], names: Iterable[str] | None) -> list[Case]:
    """The cases named (all of them for None); an unknown name lists the known ones."""
    if not names:
        return list(cases)
    by = {c.name: c for c in cases}
    out = []
    for n in names:
        if n not in by:
            raise ConfigError(f"unknown case {n!r}; configured: {', '.join(by)}")
        out.append(by[n])
    return out


# --------------------------------------------------------------------------- interference
INTERFERENCE_FIELDS: tuple[str, ...] = ("compute_slowdown", "comm_slowdown",
                                       "collective_cpu_s")


NO_INTERFERENCE: dict[str, float] = {"compute_slowdown": 1.0, "comm_slowdown": 1.0,
                                     "collective_cpu_s": 0.0}


def load_interference(path: str | Path | None) -> tuple[dict[str, float], dict[str, Any]]:
    """``(parameters, json)`` from an interference JSON: the replay's ``compute_slowdown``,
    ``comm_slowdown`` and ``collective_cpu_s`` (none: 1, 1, 0 s; a JSON from before
    ``collective_cpu_s`` was measured has 0 s)."""
    if path is None:
        return dict(NO_INTERFERENCE), {}
    data = read_json(path, missing="interference JSON not found")
    params: dict[str, float] = {}
    for name in INTERFERENCE_FIELDS:
        value = data.get(name, 0.0 if name == "collective_cpu_s" else None)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise InputError(f"needs a number, got {value!r}", path=path, field=name)
        params[name] = float(value)
    _check_interference(params, path)
    return params, data


def _check_interference(params: dict[str, float], path: str | Path) -> None:
    """Refuse values outside the replay's ranges instead of clamping them: a slowdown below
    1 or a negative cost means a broken calibration, not "no effect"."""
    for name in ("compute_slowdown", "comm_slowdown"):
        if not in_range(params[name], 1.0, MAX_SLOWDOWN):
            raise InputError(f"{params[name]!r} is out of range [1, {MAX_SLOWDOWN:g}] "
                             "(1 = no interference)", path=path, field=name)
    if not in_range(params["collective_cpu_s"], 0.0, MAX_SECONDS):
        raise InputError(f"{params['collective_cpu_s']!r} is out of range [0, "
                         f"{MAX_SECONDS:g}] seconds (0 = no interference)", path=path,
                         field="collective_cpu_s")


InterferenceSpec = str | Path | Mapping[str, str | Path] | None

def interference_for(spec: InterferenceSpec, network: str,
                     world_size: int | None = None) -> str | Path | None:
    """The interference JSON of ``network`` at ``world_size``: ``spec`` itself, or the
    first of ``spec["<network>-p<world_size>"]``, ``spec[network]``, any
    ``spec["<network>-p<N>"]`` (smallest N), ``spec["*"]`` (None: no interference)."""
    if spec is None or isinstance(spec, str | Path):
        return spec
    if world_size is not None and f"{network}-p{world_size}" in spec:
        return spec[f"{network}-p{world_size}"]
    if network in spec:
        return spec[network]
    same = sorted((int(k.rsplit("-p", 1)[1]), v) for k, v in spec.items()
                  if k.startswith(f"{network}-p"))
    return same[0][1] if same else spec.get("*")


_INTERFERENCE_KEY = re.compile(r"^(?P<net>[a-z0-9]+)(?:-p(?P<p>[1-9][0-9]*))?$")

def parse_interference_args(values: Sequence[str]) -> InterferenceSpec:
    """``["PATH"]`` or ``["tbf100mbit=PATH", "tbf100mbit-p3=PATH", "*=PATH", ...]`` ->
    a spec (a key names a network, optionally at one world size)."""
    if not values:
        return None
    out: dict[str, str] = {}
    for value in values:
        key, sep, path = value.partition("=")
        if not sep:
            key, path = "*", value
        match = _INTERFERENCE_KEY.match(key)
        if key != "*" and (match is None or match.group("net") not in NETWORKS):
            raise ConfigError(f"--interference {value!r}: the key must be a network "
                              f"({', '.join(sorted(NETWORKS))}), optionally with -p<ranks> "
                              "(e.g. tbf1gbit-p3), or *")
        out[key] = path
    return out
