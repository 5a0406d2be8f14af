"""GPU compute traces replayed on a two-level cluster, flat vs hierarchical all-reduce
(the study of the paper's architectures section: does a hierarchical all-reduce pay?).

Each *topology case* is a topology file (:mod:`gradsched.costmodel.topology`: nodes x
ranks per node, an intra-node and an inter-node level), the collective model it is replayed
with (``flat``: one ring over all ranks; ``hierarchical``: reduce-scatter in the node,
all-reduce across, all-gather in the node) and, optionally, the measured all-ranks sweep of
the same cluster and world size (nccl-tests on ``nodes x ranks_per_node`` GPUs), replayed
too as the reference. Every compute trace is replayed with every planner of the list on each
case (:func:`gradsched.experiments.grid.compare`; a trace that did not measure forward gets
the default forward assumption, :func:`gradsched.traces.forward.with_forward`).

:func:`topology_replay` writes one row per (compute, topology case, algorithm);
:mod:`gradsched.report.topology` pairs and formats them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.overlap_slowdown import resolve
from gradsched.costmodel.topology import TOPOLOGY_COLLECTIVES, load_topology
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.common import load_case_trace
from gradsched.experiments.grid import GridCase, run_grid
from gradsched.replay.engine import ReplayOptions
from gradsched.traces.bundle import ComputeTrace

COLUMNS = (
    "compute", "topology", "collective", "nodes", "ranks_per_node", "world_size", "algorithm",
    "iteration_s", "exposed_comm_s", "measured_sweep", "sweep_iteration_s",
    "vs_sweep_pct",
)
"""The result CSV's columns (seconds; ``vs_sweep_pct`` = 100 (topology / sweep - 1))."""


@dataclass(frozen=True)
class TopologyCase:
    """One topology file replayed with one collective model (and its measured sweep)."""

    name: str
    file: Path
    collective: str
    measured: Path | None = None

    def __post_init__(self) -> None:
        if self.collective not in TOPOLOGY_COLLECTIVES:
            raise ConfigError(f"topology {self.name}: collective must be one of "
                              f"{', '.join(TOPOLOGY_COLLECTIVES)}, got {self.collective!r}")


def _measured_model(case: TopologyCase, world_size: int) -> object | None:
    """The measured sweep's model; it must hold the topology's world size."""
    if case.measured is None:
        return None
    model = load_comm_spec(str(case.measured))
    held = model.world_sizes()
    if held is not None and world_size not in held:
        raise InputError(f"the measured sweep holds world sizes {', '.join(map(str, held))}, "
                         f"but topology {case.name} ({case.file}) has {world_size} ranks",
                         path=case.measured, field="world_size")
    return model


def _grid_cases(compute: str, trace: ComputeTrace, case: TopologyCase,
                algorithms: Sequence[str]) -> list[GridCase]:
    """The trace on the case's collective model, then on its measured sweep (if any)."""
    topo = load_topology(case.file)
    world = topo.world_size
    labels = {"compute": compute, "topology": case.name, "collective": case.collective,
              "nodes": topo.nodes, "ranks_per_node": topo.ranks_per_node,
              "measured_sweep": case.measured.stem if case.measured is not None else ""}
    out = [GridCase(trace, topo.collective_model(case.collective), world, tuple(algorithms),
                    labels | {"priced_by": "topology"})]
    sweep_model = _measured_model(case, world)
    if sweep_model is not None:
        out.append(GridCase(trace, sweep_model, world, tuple(algorithms),  # type: ignore[arg-type]
                            labels | {"priced_by": "sweep"}))
    return out


def _rows(frame: pd.DataFrame) -> list[dict]:
    """One row per (compute, topology case, algorithm) of the grid's frame, with the
    replay on the case's measured sweep as the reference."""
    rows = []
    own = frame[frame["priced_by"] == "topology"]
    swept = frame[frame["priced_by"] == "sweep"]
    for (compute, topology), results in own.groupby(["compute", "topology"], sort=False):
        mine = swept[(swept["compute"] == compute) & (swept["topology"] == topology)]
        sweep = mine.set_index("algorithm")["iteration_s"] if not mine.empty else None
        for row in results.itertuples(index=False):
            reference = float(sweep[row.algorithm]) if sweep is not None else float("nan")
            rows.append({
                "compute": row.compute, "topology": row.topology,
                "collective": row.collective, "nodes": int(row.nodes),
                "ranks_per_node": int(row.ranks_per_node), "world_size": int(row.world_size),
                "algorithm": row.algorithm, "iteration_s": float(row.iteration_s),
                "exposed_comm_s": float(row.exposed_comm_s),
                "measured_sweep": row.measured_sweep,
                "sweep_iteration_s": reference,
                "vs_sweep_pct": 100.0 * (float(row.iteration_s) / reference - 1.0),
            })
    return rows


def topology_replay(computes: Mapping[str, str | Path], cases: Iterable[TopologyCase],
                    algorithms: Sequence[str], iterations: int = 5,
                    overlap: str | float = "auto") -> pd.DataFrame:
    """Replay every compute trace on every topology case with every algorithm; backward
    compute at ``1/s`` beside a collective, ``s`` from ``overlap`` (``auto``: the trace's
    GPU generation's, :func:`gradsched.costmodel.overlap_slowdown.resolve`)."""
    cases = list(cases)
    if not computes or not cases or not algorithms:
        raise ConfigError("topology replay: give at least one compute trace, one topology "
                          "and one algorithm")
    if len({c.name for c in cases}) != len(cases):
        raise ConfigError("topology replay: two topology cases share a name")
    frames = []
    for compute, path in computes.items():
        trace = load_case_trace(path)
        grid: list[GridCase] = []
        for case in cases:
            grid += _grid_cases(compute, trace, case, algorithms)
        slowdown = resolve(trace.meta, overlap).value
        frames.append(run_grid(grid, ReplayOptions(iterations=iterations,
                                                   compute_slowdown=slowdown)))
    frame = pd.concat(frames, ignore_index=True)
    return pd.DataFrame(_rows(frame), columns=list(COLUMNS))
