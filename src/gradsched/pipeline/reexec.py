"""The re-execution stage (``workflow/rules/reexec.smk``): calibrations, targets, arguments.

The configuration is the ``reexec:`` mapping of ``config/reexec.yaml`` (schema:
``workflow/schemas/reexec.schema.yaml``). Cases are parsed (and named) by
:func:`gradsched.reexec.config.parse_cases`; the functions here take the parsed cases,
anything with ``name``, ``network`` and ``world_size``. Network keys and ``tc`` rates come
from :mod:`gradsched.networks`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gradsched.errors import ConfigError
from gradsched.networks import NETWORKS, tc_rate

NETWORK_PATTERN = "|".join(NETWORKS)
"""Wildcard constraint matching every network key (``loopback|tbf1gbit|tbf100mbit``)."""

INTERFERENCE_OPTIONS: dict[str, str] = {
    "backend": "--backend",
    "kernel": "--kernel",
    "comm_bytes": "--comm-bytes",
    "small_bytes": "--small-bytes",
    "rounds": "--rounds",
    "reps": "--reps",
    "threads": "--threads",
}
"""``reexec.interference`` key -> ``gradsched reexec interference`` option (in this order)."""


class CaseLike(Protocol):
    name: str
    network: str
    world_size: int


def networks(reexec: Mapping[str, Any]) -> list[str]:
    """The calibrated networks (``interference.networks``, default loopback)."""
    inter = reexec.get("interference") or {}
    return list(inter.get("networks") or ["loopback"])


def interference_world_sizes(reexec: Mapping[str, Any], where: str) -> list[int]:
    """The calibrated world sizes (``interference.world_sizes``, default 2)."""
    inter = reexec.get("interference") or {}
    worlds = [int(w) for w in inter.get("world_sizes") or [2]]
    if any(w < 2 for w in worlds):
        raise ConfigError(f"{where}: interference world_sizes must be >= 2")
    return worlds


def calibrations(reexec: Mapping[str, Any], where: str) -> list[tuple[str, int]]:
    """(network, world size) of every interference calibration."""
    worlds = interference_world_sizes(reexec, where)
    return [(n, w) for n in networks(reexec) for w in worlds]


def calibration_for(
    reexec: Mapping[str, Any], network: str, world_size: int, where: str
) -> tuple[str, int]:
    """The calibrated (network, world size) that serves a case: its own, else its
    network's first calibrated world size, else the first network's (as
    gradsched.reexec.config.interference_for picks)."""
    nets, worlds = networks(reexec), interference_world_sizes(reexec, where)
    net = network if network in nets else nets[0]
    return net, (world_size if world_size in worlds else worlds[0])


def interference_file(out_dir: str, network: str, world: int) -> str:
    return f"{out_dir}/interference-{network}-p{world}.json"


def calibration_files(reexec: Mapping[str, Any], out_dir: str, where: str) -> list[str]:
    """The interference JSON of every calibration, in :func:`calibrations` order."""
    return [interference_file(out_dir, n, w) for n, w in calibrations(reexec, where)]


def case_interference(
    reexec: Mapping[str, Any],
    cases: Sequence[CaseLike],
    name: str,
    out_dir: str,
    where: str,
) -> str:
    """The interference JSON the `best` planner of case ``name`` scores with: the case's
    network's, or the first calibrated network's (as reexec_collect uses)."""
    by_name = {c.name: c for c in cases}
    if name not in by_name:
        raise ConfigError(f"reexec: no case {name!r} in {where}")
    case = by_name[name]
    net, world = calibration_for(reexec, case.network, case.world_size, where)
    return interference_file(out_dir, net, world)


def interference_args(reexec: Mapping[str, Any], network: str, world: int) -> str:
    """``gradsched reexec interference`` arguments of one (network, world size)."""
    inter = dict(reexec.get("interference") or {})
    args = []
    for key, flag in INTERFERENCE_OPTIONS.items():
        if key in inter:
            args.append(f"{flag} {shlex.quote(str(inter[key]))}")
    args.append(f"--world-size {int(world)}")
    if network not in NETWORKS:
        raise ConfigError(f"reexec interference: unknown network {network!r}")
    rate = tc_rate(network)
    if rate is not None:
        args.append(f"--cluster {rate}")
    return " ".join(args)


def collect_interference_args(
    reexec: Mapping[str, Any], files: Sequence[str], where: str
) -> str:
    """``--interference KEY=JSON`` of ``gradsched reexec collect``: one per calibrated
    (network, world size), plus ``*`` = the first one (a case without its own calibration
    gets its network's first one, a network without any the first network's)."""
    keys = (f"{n}-p{w}" for n, w in calibrations(reexec, where))
    pairs = [*zip(keys, files, strict=False), ("*", files[0])]
    return " ".join(
        "--interference " + shlex.quote(f"{key}={path}") for key, path in pairs
    )


def case_folders(meta_files: Iterable[str]) -> str:
    """The case folders (parents of each case's meta.json), space-separated."""
    return " ".join(str(Path(p).parent) for p in meta_files)


def committed_files(fig: str, tab: str, results: str) -> list[str]:
    """Figure, table and statistics drawn from the committed measurements (for `all`)."""
    return [
        f"{fig}/reexec.pdf",
        f"{fig}/reexec.png",
        f"{tab}/reexec.tex",
        f"{tab}/reexec.md",
        f"{tab}/reexec-summary.tex",
        f"{tab}/reexec-summary.md",
        f"{tab}/reexec-stock-ddp.tex",
        f"{tab}/reexec-stock-ddp.md",
        f"{results}/reexec-committed/stats.csv",
    ]


# ----------------------------------------- gradient accumulation and ZeRO-1 (reexec-accum)
ACCUM_CONFIG = "config/reexec-accum.yaml"
"""The accumulation / ZeRO-1 case set (same schema as ``config/reexec.yaml``)."""


def committed_interference(data_dir: str, network: str, world: int) -> str:
    """The committed calibration of one (network, world size):
    ``<data_dir>/interference-<network>-p<world>.json``."""
    if network not in NETWORKS:
        raise ConfigError(f"reexec: unknown network {network!r}")
    return f"{data_dir}/interference-{network}-p{int(world)}.json"


def accum_case_interference(cases: Sequence[CaseLike], name: str, data_dir: str) -> str:
    """The committed calibration the case ``name`` of the accumulation set plans with."""
    by_name = {c.name: c for c in cases}
    if name not in by_name:
        raise ConfigError(f"reexec-accum: no case {name!r} in {ACCUM_CONFIG}")
    case = by_name[name]
    return committed_interference(data_dir, case.network, case.world_size)


def accum_interference_files(cases: Sequence[CaseLike], data_dir: str) -> list[str]:
    """The committed calibrations of every (network, world size) of ``cases``, sorted."""
    return sorted({committed_interference(data_dir, c.network, c.world_size) for c in cases})


def accum_collect_args(files: Sequence[str]) -> str:
    """``--interference <network>-p<world>=JSON`` for every committed calibration file."""
    args = []
    for path in files:
        stem = Path(path).name.removeprefix("interference-").removesuffix(".json")
        args.append("--interference " + shlex.quote(f"{stem}={path}"))
    return " ".join(args)


def accum_committed_files(tab: str, gen: str, results: str, data_dir: str) -> list[str]:
    """Tables, macros and CSVs of the committed accumulation / ZeRO-1 measurements (for
    `all`); none before they are committed (``<data_dir>/measured.csv``)."""
    if not Path(data_dir, "measured.csv").is_file():
        return []
    return [
        f"{tab}/reexec-accum.tex",
        f"{tab}/reexec-accum.md",
        f"{tab}/reexec-accum-summary.tex",
        f"{tab}/reexec-accum-summary.md",
        f"{gen}/reexec-accum-macros.tex",
        f"{results}/reexec-accum-committed/rows.csv",
        f"{results}/reexec-accum-committed/summary.csv",
    ]
