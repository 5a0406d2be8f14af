"""The capture stage (``workflow/rules/capture.smk``): targets and CLI arguments.

The configuration is the ``capture:`` mapping of ``config/capture.yaml``, checked once
against its schema (``workflow/schemas/capture.schema.yaml``: every key, type and range) by
:func:`select_spec`; the functions here check only what the schema cannot state (a compute
entry complete once the defaults are merged in, names that become file names, no two
entries for one output). Each list entry becomes one ``gradsched capture`` command; the
option tables below map an entry's keys to that command's flags and are the one place that
lists them (the schema's keys are checked against them by the tests).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError, InputError
from gradsched.names import plain_name, registry_model
from gradsched.schema_check import check_schema

SCHEMA = "capture.schema.yaml"
"""The capture configuration's schema (``workflow/schemas/``)."""

TIERS = ("cpu", "cluster", "gpu")
"""Capture tiers: CPU (compute, loopback sweeps, CPU DDP), emulated cluster (root), GPU."""

COMPUTE_OPTIONS: dict[str, str] = {
    "model": "--model",
    "batch_size": "--batch-size",
    "seq_len": "--seq-len",
    "device": "--device",
    "dtype": "--dtype",
    "warmup": "--warmup",
    "iters": "--iters",
    "threads": "--threads",
    "clock": "--clock",
    "note": "--note",
}
"""``capture.compute[]`` key -> ``gradsched capture compute`` option."""
COMPUTE_OTHER_KEYS = ("stem", "no_update")
"""Compute keys that are not a valued option (``no_update`` is the ``--no-update`` switch)."""

COMM_OPTIONS: dict[str, str] = {
    "backend": "--backend",
    "world_size": "--world-size",
    "collectives": "--collectives",
    "min_bytes": "--min-bytes",
    "max_bytes": "--max-bytes",
    "factor": "--factor",
    "iters": "--iters",
    "warmup": "--warmup",
    "min_iters": "--min-iters",
    "time_budget_s": "--time-budget-s",
    "threads_per_rank": "--threads",
    "rate": "--cluster",
    "note": "--note",
}
"""``capture.comm.<kind>[]`` key -> ``gradsched capture comm`` option."""
COMM_OTHER_KEYS = ("name", "nproc_per_node", "in_place")
"""Comm keys that are not a valued option (``in_place`` is the ``--in-place`` switch)."""
COMM_KINDS = ("loopback", "cluster", "torchrun")

ITERATION_OPTIONS: dict[str, str] = {
    "model": "--model",
    "batch_size": "--batch-size",
    "seq_len": "--seq-len",
    "device": "--device",
    "dtype": "--dtype",
    "backend": "--backend",
    "world_size": "--world-size",
    "bucket_cap_mb": "--bucket-cap-mb",
    "iters": "--iters",
    "warmup": "--warmup",
    "threads_per_rank": "--threads",
}
"""``capture.iteration[]`` key -> ``gradsched capture iteration`` option."""
ITERATION_OTHER_KEYS = ("name", "nproc_per_node")


def checked_name(value: Any, field: str, *, model: bool = False) -> str:
    """``value`` if it is a plain name (a zoo name for ``model``): it becomes a file or
    folder name of the results; a ConfigError naming the field otherwise."""
    try:
        return (registry_model if model else plain_name)(value, field=field)
    except InputError as exc:
        raise ConfigError(f"capture config: {exc}") from None


def select_spec(from_config: Any, from_file: Any,
                where: str | Path = "config/capture.yaml") -> dict[str, Any]:
    """The capture mapping: the main config's ``capture:`` when present, else the file's
    (``where``), checked against :data:`SCHEMA`."""
    spec = from_config
    if spec is None:
        spec = from_file or {}
    check_schema(spec, SCHEMA, where, part={"$ref": "#/$defs/capture"}, field="capture")
    return spec


def torchrun_command(executable: str) -> str:
    """torchrun of the interpreter ``executable`` (the .venv one running Snakemake)."""
    launcher = Path(executable).parent / "torchrun"
    if launcher.exists():
        return shlex.quote(str(launcher))
    return f"{shlex.quote(executable)} -m torch.distributed.run"


def cli_flags(
    entry: Mapping[str, Any],
    table: Mapping[str, str],
    skip: Sequence[str] = (),
) -> str:
    """``--flag value`` of every key of ``entry`` (lists joined by commas), in its order;
    ``entry`` matches the schema, whose keys are those of ``table`` and ``skip``."""
    args = []
    for key, value in entry.items():
        if key in skip:
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        args.append(f"{table[key]} {shlex.quote(str(value))}")
    return " ".join(args)


def compute_entries(capture: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"<device>/<stem>": entry merged over ``defaults``} of ``capture.compute``."""
    defaults = capture.get("defaults") or {}
    out: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(capture.get("compute") or []):
        entry = {**defaults, **raw}
        for key in ("model", "batch_size"):
            if key not in entry:
                raise ConfigError(f"capture.compute[{i}]: missing {key}")
        where = f"capture.compute[{i}]"
        model = checked_name(entry["model"], f"{where}.model", model=True)
        device = checked_name(str(entry.get("device", "cpu")).split(":")[0],
                              f"{where}.device")
        seq = f"-s{entry['seq_len']}" if entry.get("seq_len") else ""
        stem = checked_name(entry.get("stem") or (
            f"{model.replace('.', '-')}{seq}-b{entry['batch_size']}-{device}-"
            f"{entry.get('dtype', 'fp32')}"
        ), f"{where}.stem")
        key = f"{device}/{stem}"
        if key in out:
            raise ConfigError(f"capture.compute[{i}]: a second entry for {key}")
        out[key] = entry
    return out


def compute_entry(capture: Mapping[str, Any], device: str, stem: str) -> dict[str, Any]:
    """The compute entry that makes ``results/captured/compute/<device>/<stem>.csv``."""
    key = f"{device}/{stem}"
    entries = compute_entries(capture)
    if key not in entries:
        raise ConfigError(
            f"no capture.compute entry makes results/captured/compute/{key}.csv; "
            f"configured: {', '.join(sorted(entries))}"
        )
    return entries[key]


def compute_args(capture: Mapping[str, Any], device: str, stem: str) -> str:
    """``gradsched capture compute`` arguments of one compute entry."""
    entry = compute_entry(capture, device, stem)
    args = cli_flags(entry, COMPUTE_OPTIONS, skip=COMPUTE_OTHER_KEYS)
    return args + (" --no-update" if entry.get("no_update") else "")


def is_gpu(entry: Mapping[str, Any]) -> bool:
    """Whether an entry runs on GPUs (device cuda or backend nccl)."""
    return str(entry.get("device", "cpu")).startswith("cuda") or (
        entry.get("backend") == "nccl"
    )


def comm_entries(capture: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """{name: entry} of ``capture.comm.<kind>`` (loopback, cluster or torchrun)."""
    out = {}
    for i, entry in enumerate((capture.get("comm") or {}).get(kind) or []):
        out[checked_name(entry["name"], f"capture.comm.{kind}[{i}].name")] = entry
    return out


def comm_entry(capture: Mapping[str, Any], kind: str, name: str) -> dict[str, Any]:
    entries = comm_entries(capture, kind)
    if name not in entries:
        raise ConfigError(f"no capture.comm.{kind} entry named {name!r}")
    return entries[name]


def comm_args(capture: Mapping[str, Any], kind: str, name: str) -> str:
    """``gradsched capture comm`` arguments of one sweep entry."""
    entry = comm_entry(capture, kind, name)
    args = cli_flags(entry, COMM_OPTIONS, skip=COMM_OTHER_KEYS)
    return args + (" --in-place" if entry.get("in_place") else "")


def iteration_entries(capture: Mapping[str, Any], gpu: bool) -> dict[str, dict[str, Any]]:
    """{name: entry} of ``capture.iteration``: with ``nproc_per_node`` (torchrun, GPU) when
    ``gpu``, else without."""
    out = {}
    for i, entry in enumerate(capture.get("iteration") or []):
        checked_name(entry["name"], f"capture.iteration[{i}].name")
        checked_name(entry["model"], f"capture.iteration[{i}].model", model=True)
        if ("nproc_per_node" in entry) == gpu:
            out[entry["name"]] = entry
    return out


def iteration_args(capture: Mapping[str, Any], name: str, gpu: bool) -> str:
    """``gradsched capture iteration`` arguments of one profiled-iteration entry."""
    entries = iteration_entries(capture, gpu)
    if name not in entries:
        raise ConfigError(f"no capture.iteration entry named {name!r} for this launcher")
    return cli_flags(entries[name], ITERATION_OPTIONS, skip=ITERATION_OTHER_KEYS)


def nproc(entries: Mapping[str, Mapping[str, Any]], name: str) -> int:
    """Processes (GPUs) per node of entry ``name`` (1 when absent)."""
    return int(entries.get(name, {}).get("nproc_per_node", 1))


def comm_nproc(capture: Mapping[str, Any], name: str) -> int:
    """GPUs of the torchrun sweep ``name``."""
    return nproc(comm_entries(capture, "torchrun"), name)


def iteration_nproc(capture: Mapping[str, Any], name: str) -> int:
    """GPUs of the torchrun profiled-iteration entry ``name``."""
    return nproc(iteration_entries(capture, True), name)


def capture_targets(capture: Mapping[str, Any], tier: str, results: str) -> list[str]:
    """Outputs of one tier (cpu, cluster or gpu); ``results`` is the results folder."""
    if tier not in TIERS:
        raise ConfigError(
            f"capture.tiers: unknown tier {tier!r}; use {', '.join(TIERS)}"
        )
    out = []
    for key, entry in compute_entries(capture).items():
        if is_gpu(entry) == (tier == "gpu") and tier != "cluster":
            out.append(f"results/captured/compute/{key}.csv")
    if tier == "cpu":
        out += [
            f"results/captured/comm/loopback/{n}.csv"
            for n in comm_entries(capture, "loopback")
        ]
        out += [
            f"{results}/capture/iteration/cpu/{n}/summary.csv"
            for n in iteration_entries(capture, False)
        ]
    elif tier == "cluster":
        out += [
            f"results/captured/comm/cluster/{n}.csv"
            for n in comm_entries(capture, "cluster")
        ]
    else:
        out += [
            f"results/captured/comm/gpu/{n}.csv"
            for n in comm_entries(capture, "torchrun")
        ]
        out += [
            f"{results}/capture/iteration/gpu/{n}/summary.csv"
            for n in iteration_entries(capture, True)
        ]
    return out


def tier_targets(capture: Mapping[str, Any], results: str) -> list[str]:
    """Outputs of every tier in ``capture.tiers`` (default: cpu)."""
    return [
        t
        for tier in capture.get("tiers", ["cpu"])
        for t in capture_targets(capture, tier, results)
    ]
