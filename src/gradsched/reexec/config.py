"""The re-execution's configuration: its cases, its settings and the interference JSON
each case's plans and predictions use (``config/reexec.yaml``; the experiment's method is
in :mod:`gradsched.reexec`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError, ConfigFileError, InputError
from gradsched.experiments.grid import expand_algorithms
from gradsched.io import read_json, read_yaml
from gradsched.limits import MAX_GRAD_ACCUM, MAX_SECONDS, in_range, is_grad_accum
from gradsched.names import plain_name, registry_model
from gradsched.networks import NETWORKS, tc_rate
from gradsched.planners import WFBP_FAMILY
from gradsched.replay.engine import MAX_SLOWDOWN
from gradsched.schema_check import check_schema

# --------------------------------------------------------------------------- cases
ZERO1_MODES: dict[str, str] = {"plain": "zero1", "overlap": "zero1-overlap"}
"""A case's ``zero1`` modes -> their item (and row) labels: ``plain``:
``ZeroRedundancyOptimizer`` stepped after backward; ``overlap``: ``overlap_with_ddp`` with
DDP's ``hook_with_zero_step`` (:mod:`gradsched.planners.zero1_torch`)."""

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
    grad_accum: int = 1
    """Micro-batches per optimizer step: every item of the case times (and the replay
    predicts) one step of ``grad_accum`` micro-batches (:mod:`gradsched.runtime.runners`)."""
    zero1: tuple[str, ...] = ()
    """ZeRO-1 items of the case (:data:`ZERO1_MODES`): stock DDP with torch's
    ``ZeroRedundancyOptimizer``, predicted by the ``zero1_torch`` plan."""

    @property
    def rate(self) -> str | None:
        """The ``tc`` rate of the emulated cluster, or None for loopback."""
        return tc_rate(self.network)


@dataclass(frozen=True)
class Settings:
    """How every case is measured and predicted; read from a file by
    :func:`parse_settings`, which checks it (values given in code are taken as they are)."""

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

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["algorithms"] = list(self.algorithms)
        out["ddp_bucket_cap_mb"] = list(self.ddp_bucket_cap_mb)
        out["ddp_bucket_cap_mb_list_from"] = list(self.ddp_bucket_cap_mb_list_from)
        out["knobs"] = {k: dict(v) for k, v in self.knobs.items()}
        return out


SCHEMA = "reexec.schema.yaml"
"""The file's schema (``workflow/schemas/``): every field's type and range."""

SETTINGS_SCHEMA = {"$ref": "#/$defs/settings"}
CASES_SCHEMA = {"type": "array", "items": {"$ref": "#/$defs/case"}}


def load_config(path: str | Path) -> tuple[list[Case], Settings]:
    """Read ``config/reexec.yaml`` (mapping ``reexec`` with ``settings`` and ``cases``),
    checked against :data:`SCHEMA`, then by :func:`check_settings` and
    :func:`check_cases`."""
    path = Path(path)
    data = read_yaml(path, missing="config file not found")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigFileError("expected a mapping 'reexec'", path=path)
    document = data if "reexec" in data else {"reexec": data}
    check_schema(document, SCHEMA, path)
    spec = document["reexec"] or {}
    if not spec.get("cases"):  # an empty file or a misspelt key: nothing would run
        raise ConfigFileError("no cases: expected reexec: {settings: ..., cases: [...]}",
                              path=path, field="reexec.cases")
    settings = _settings(spec.get("settings") or {}, path)
    return _cases(spec["cases"], path), settings


def parse_settings(raw: Mapping[str, Any], where: str | Path = "<config>") -> Settings:
    """``settings:`` mapping (of the config file, or of a measured case's ``meta.json``)
    -> :class:`Settings`; checked against :data:`SCHEMA`, then by :func:`check_settings`."""
    check_schema(raw, SCHEMA, where, part=SETTINGS_SCHEMA, field="settings")
    return _settings(raw, where)


def parse_cases(raw: Sequence[Mapping[str, Any]], where: str | Path = "<config>") -> list[Case]:
    """``cases:`` list -> :class:`Case` objects; checked against :data:`SCHEMA`, then by
    :func:`check_cases`; ``comm`` defaults to the committed sweep."""
    check_schema(raw, SCHEMA, where, part=CASES_SCHEMA, field="cases")
    return _cases(raw, where)


def _settings(raw: Mapping[str, Any], where: str | Path) -> Settings:
    """:class:`Settings` of a settings mapping that matches the schema."""
    values = dict(raw)
    for key in ("algorithms", "ddp_bucket_cap_mb_list_from"):
        if key in values:
            values[key] = tuple(values[key])
    if "ddp_bucket_cap_mb" in values:
        values["ddp_bucket_cap_mb"] = tuple(
            None if cap in (None, "default") else float(cap)
            for cap in values["ddp_bucket_cap_mb"])
    settings = Settings(**values)
    check_settings(settings, where)
    return settings


def _cases(raw: Sequence[Mapping[str, Any]], where: str | Path) -> list[Case]:
    """:class:`Case` objects of a cases list that matches the schema, with the defaults
    of ``name`` and ``comm``."""
    cases = []
    for entry in raw:
        network, world, batch = entry["network"], entry["world_size"], entry["batch_size"]
        accum = entry.get("grad_accum", 1)
        suffix = "" if accum == 1 else f"-k{accum}"  # k = 1: the names of before
        cases.append(Case(
            name=entry.get("name") or f"{entry['model']}-b{batch}-p{world}-{network}{suffix}",
            model=entry["model"], batch_size=batch, world_size=world, network=network,
            compute=entry["compute"],
            comm=entry.get("comm") or f"traces/comm/cpu/gloo-{network}-p{world}.csv",
            seq_len=entry.get("seq_len"), grad_accum=accum,
            zero1=tuple(entry.get("zero1") or ())))
    check_cases(cases, where)
    return cases


def case_of(raw: Mapping[str, Any]) -> Case:
    """The :class:`Case` a measured case's ``meta.json`` records (``asdict``; folders
    measured before ``grad_accum`` and ``zero1`` existed: 1 and none)."""
    values = dict(raw)
    values["zero1"] = tuple(values.get("zero1") or ())
    return Case(**values)


# ------------------------------------------------- what the schema cannot state
def check_settings(settings: Settings, where: str | Path) -> None:
    """Known planners, per-bucket cap lists only from contiguous all-reduce planners, and
    the warmup those lists need (DDP rebuilds its buckets after the first iteration)."""
    try:
        expand_algorithms(list(settings.algorithms))
    except ConfigError as exc:
        raise ConfigFileError(str(exc), path=where, field="settings.algorithms") from None
    for name in settings.ddp_bucket_cap_mb_list_from:
        if name not in WFBP_FAMILY:
            raise ConfigFileError(f"{name!r} does not make contiguous all-reduce plans that "
                                  f"stock DDP can run; one of {', '.join(WFBP_FAMILY)}",
                                  path=where, field="settings.ddp_bucket_cap_mb_list_from")
    if settings.ddp_bucket_cap_mb_list_from and settings.warmup < 1:
        raise ConfigFileError("ddp_bucket_cap_mb_list_from needs warmup >= 1 (DDP rebuilds "
                              "its buckets after the first iteration)", path=where,
                              field="settings.warmup")


def check_cases(cases: Sequence[Case], where: str | Path) -> None:
    """Models of the zoo (never ``package.module:attr``), plain and unique case names (a
    name becomes the case's output folder), micro-batches per step in ``[1,
    MAX_GRAD_ACCUM]`` and known ZeRO-1 modes (at any ``grad_accum``: both accumulate under
    DDP's ``no_sync()``, :mod:`gradsched.runtime.runners`)."""
    names: set[str] = set()
    for i, case in enumerate(cases):
        registry_model(case.model, path=where, field=f"cases[{i}].model")
        if not is_grad_accum(case.grad_accum):
            raise ConfigFileError(f"grad_accum must be an integer in [1, {MAX_GRAD_ACCUM}] "
                                  f"(micro-batches per optimizer step), got "
                                  f"{case.grad_accum!r}", path=where,
                                  field=f"cases[{i}].grad_accum")
        for mode in case.zero1:
            if mode not in ZERO1_MODES:
                raise ConfigFileError(f"unknown ZeRO-1 mode {mode!r}; one of "
                                      f"{', '.join(ZERO1_MODES)}", path=where,
                                      field=f"cases[{i}].zero1")
        plain_name(case.name, path=where, field=f"cases[{i}].name")
        if case.name in names:
            raise ConfigFileError(f"a second case named {case.name!r}", path=where,
                                  field=f"cases[{i}].name")
        names.add(case.name)


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
