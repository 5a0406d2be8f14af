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

import yaml

from gradsched.errors import ConfigError, InputError
from gradsched.experiments.grid import expand_algorithms
from gradsched.io import read_json, read_text
from gradsched.limits import MAX_SECONDS, in_range
from gradsched.names import plain_name, registry_model
from gradsched.networks import NETWORKS, tc_rate
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

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["algorithms"] = list(self.algorithms)
        out["ddp_bucket_cap_mb"] = list(self.ddp_bucket_cap_mb)
        out["knobs"] = {k: dict(v) for k, v in self.knobs.items()}
        return out


_CASE_KEYS = {"name", "model", "batch_size", "world_size", "network", "compute", "comm",
              "seq_len"}


_SETTING_KEYS = {f for f in Settings.__dataclass_fields__}

def load_config(path: str | Path) -> tuple[list[Case], Settings]:
    """Read ``config/reexec.yaml`` (mapping ``reexec`` with ``settings`` and ``cases``)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", path=path)
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", path=path,
                         line=mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping 'reexec'", path=path)
    spec = data.get("reexec", data)
    if not isinstance(spec, dict):
        raise InputError("expected a mapping 'reexec'", path=path)
    return parse_cases(spec.get("cases") or [], path), parse_settings(spec.get("settings") or {},
                                                                      path)


def _cap(value: Any, where: str | Path) -> float | None:
    """A ``ddp_bucket_cap_mb`` entry: a number of MiB, or ``default`` (None)."""
    if value is None or value == "default":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"ddp_bucket_cap_mb entries are MiB or 'default', got {value!r}",
                         path=where, field="settings.ddp_bucket_cap_mb")
    return float(value)


def parse_settings(raw: Mapping[str, Any], where: str | Path = "<config>") -> Settings:
    """``settings:`` mapping -> :class:`Settings` (unknown keys are refused)."""
    unknown = set(raw) - _SETTING_KEYS
    if unknown:
        raise InputError(f"unknown settings key(s) {sorted(unknown)}; known: "
                         f"{sorted(_SETTING_KEYS)}", path=where, field="settings")
    values = dict(raw)
    for key in ("algorithms", "ddp_bucket_cap_mb"):
        if key in values:
            values[key] = tuple(values[key])
    if "ddp_bucket_cap_mb" in values:
        values["ddp_bucket_cap_mb"] = tuple(_cap(v, where) for v in values["ddp_bucket_cap_mb"])
    settings = Settings(**values)
    expand_algorithms(list(settings.algorithms))
    return settings


def parse_cases(raw: Sequence[Mapping[str, Any]], where: str | Path = "<config>") -> list[Case]:
    """``cases:`` list -> :class:`Case` objects; ``comm`` defaults to the committed sweep."""
    cases = []
    names: set[str] = set()
    for i, entry in enumerate(raw):
        unknown = set(entry) - _CASE_KEYS
        if unknown:
            raise InputError(f"cases[{i}]: unknown key(s) {sorted(unknown)}", path=where)
        for key in ("model", "batch_size", "world_size", "network", "compute"):
            if key not in entry:
                raise InputError(f"cases[{i}]: missing {key!r}", path=where)
        network = str(entry["network"])
        if network not in NETWORKS:
            raise InputError(f"cases[{i}]: network must be one of {sorted(NETWORKS)}, not "
                             f"{network!r}", path=where)
        world = int(entry["world_size"])
        if world < 2:
            raise InputError(f"cases[{i}]: world_size must be >= 2", path=where)
        comm = str(entry.get("comm") or f"traces/comm/cpu/gloo-{network}-p{world}.csv")
        model = registry_model(entry["model"], path=where, field=f"cases[{i}].model")
        name = plain_name(entry.get("name") or
                          f"{model}-b{entry['batch_size']}-p{world}-{network}",
                          path=where, field=f"cases[{i}].name")
        if name in names:
            raise InputError(f"cases[{i}]: a second case named {name!r}", path=where)
        names.add(name)
        cases.append(Case(name=name, model=model,
                          batch_size=int(entry["batch_size"]), world_size=world,
                          network=network, compute=str(entry["compute"]), comm=comm,
                          seq_len=entry.get("seq_len")))
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
