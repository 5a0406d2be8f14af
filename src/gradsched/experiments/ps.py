"""All-reduce against parameter servers, replayed (the study of the paper's architectures
section: does a parameter server beat all-reduce on the same links?).

Each *PS case* is a compute trace, a network and a world size ``P``: the all-reduce side is
priced by the measured collective sweep of that network (``--comm``), the parameter-server
side by the measured point-to-point sweep of the same links
(:mod:`gradsched.costmodel.ps`: BytePS-style partitions over ``S`` servers, push + pull per
partition). Every case is replayed for every server layout of the list (``S`` servers,
separate machines or co-located with the workers, ``placement`` of the partitions) with the
parameter-server planners (``bsp-ps``, ``wfbp-ps``, ``bytescheduler-ps``) and with the
all-reduce planners that price a PS as they price a collective (``mgwfbp``, ``ddp``); the
all-reduce side with ``syncsgd``, ``wfbp``, ``mgwfbp``, ``bytescheduler``, ``ddp``.

:func:`ps_replay` writes one row per (case, architecture, algorithm), in seconds;
:func:`gradsched.report.ps_replay.ps_replay_table` formats it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.ps import PSModel, ps_from_dict
from gradsched.errors import ConfigError
from gradsched.experiments.common import load_case_trace
from gradsched.experiments.grid import GridCase, run_grid
from gradsched.replay.engine import ReplayOptions
from gradsched.traces.bundle import ComputeTrace

ALLREDUCE_ALGORITHMS: tuple[str, ...] = ("syncsgd", "wfbp", "mgwfbp", "bytescheduler", "ddp")
PS_ALGORITHMS: tuple[str, ...] = ("bsp-ps", "wfbp-ps", "mgwfbp", "bytescheduler-ps", "ddp")
COLUMNS = ("compute", "network", "world_size", "architecture", "servers", "colocated",
           "algorithm", "iteration_s", "exposed_comm_s")


@dataclass(frozen=True)
class PSCase:
    """A compute trace on one network at ``world_size`` workers."""

    compute: str  # a name for the table
    trace: Path
    network: str
    world_size: int
    allreduce: str  # comm spec of the all-reduce sweep (holds world_size)
    p2p: str  # comm spec of the point-to-point sweep of the same links


@dataclass(frozen=True)
class Layout:
    """``servers`` parameter servers (``0`` = the number of workers), co-located or not."""

    servers: int
    colocated: bool
    placement: str = "balanced"

    def resolve(self, workers: int) -> tuple[int, bool]:
        return (self.servers or workers, self.colocated)


def _grid_cases(case: PSCase, trace: ComputeTrace,
                layouts: Sequence[Layout]) -> list[GridCase]:
    """The case on all-reduce, then on every server layout."""
    base = {"compute": case.compute, "network": case.network}
    out = [GridCase(trace, load_comm_spec(case.allreduce), case.world_size,
                    ALLREDUCE_ALGORITHMS,
                    base | {"architecture": "all-reduce", "servers": 0, "colocated": False})]
    for layout in layouts:
        servers, colocated = layout.resolve(case.world_size)
        ps = PSModel(ps_from_dict({"servers": servers, "colocated": colocated,
                                   "workers": case.world_size, "placement": layout.placement,
                                   "p2p": case.p2p}, "ps-replay", case.world_size))
        name = f"PS S={servers} {'co-located' if colocated else 'separate'}"
        out.append(GridCase(trace, ps, case.world_size, PS_ALGORITHMS,
                            base | {"architecture": name, "servers": servers,
                                    "colocated": colocated}))
    return out


def ps_replay(cases: Sequence[PSCase], layouts: Sequence[Layout],
              iterations: int = 5) -> pd.DataFrame:
    """Replay every case on all-reduce and on every PS layout."""
    if not cases or not layouts:
        raise ConfigError("ps replay: give at least one case and one server layout")
    traces: dict[Path, ComputeTrace] = {}
    grid: list[GridCase] = []
    for case in cases:
        if case.trace not in traces:
            traces[case.trace] = load_case_trace(case.trace)
        grid += _grid_cases(case, traces[case.trace], layouts)
    frame = run_grid(grid, ReplayOptions(iterations=iterations))
    rows = [{"compute": row.compute, "network": row.network, "world_size": int(row.world_size),
             "architecture": row.architecture, "servers": int(row.servers),
             "colocated": bool(row.colocated), "algorithm": row.algorithm,
             "iteration_s": float(row.iteration_s), "exposed_comm_s": float(row.exposed_comm_s)}
            for row in frame.itertuples(index=False)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def parse_layout(text: str) -> Layout:
    """``S`` or ``S:colocated`` / ``S:separate`` (``P`` for S = the number of workers)."""
    count, _, where = text.partition(":")
    where = where or "separate"
    if where not in ("colocated", "separate"):
        raise ConfigError(f"--layout {text!r}: after ':' write colocated or separate")
    if count == "P":
        servers = 0
    else:
        try:
            servers = int(count)
        except ValueError:
            raise ConfigError(f"--layout {text!r}: the server count must be an integer "
                              "or P") from None
        if servers < 1:
            raise ConfigError(f"--layout {text!r}: at least one server")
    return Layout(servers, where == "colocated")
