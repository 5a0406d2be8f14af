"""GPU compute traces replayed on a two-level cluster, flat vs hierarchical all-reduce
(issue 18, items 1 and 4).

Each *topology case* is a topology file (:mod:`gradsched.costmodel.topology`: nodes x
ranks per node, an intra-node and an inter-node level), the collective model it is replayed
with (``flat``: one ring over all ranks; ``hierarchical``: reduce-scatter in the node,
all-reduce across, all-gather in the node) and, optionally, the measured all-ranks sweep of
the same cluster and world size (nccl-tests on ``nodes x ranks_per_node`` GPUs), replayed
too as the reference. Every compute trace is replayed with every planner of the list on each
case (:func:`gradsched.replay.compare.compare`; a trace that did not measure forward gets
the default forward assumption, :func:`gradsched.traces.forward.with_forward`).

:func:`topology_replay` writes one row per (compute, topology case, algorithm);
:func:`topology_replay_table` pairs the flat and the hierarchical case of the same cluster
shape into one row: both iteration times, their ratio, and the replay on the measured sweep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gradsched.costmodel.base import load_comm_spec
from gradsched.costmodel.topology import TOPOLOGY_COLLECTIVES, load_topology
from gradsched.errors import ConfigError, InputError
from gradsched.replay.compare import compare
from gradsched.replay.engine import ReplayOptions
from gradsched.report.tables import algorithm_label, fmt
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.forward import with_forward

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


def _replay_rows(compute: str, trace: ComputeTrace, case: TopologyCase,
                 algorithms: Sequence[str], options: ReplayOptions) -> list[dict]:
    topo = load_topology(case.file)
    world = topo.world_size
    results = compare(trace, topo.collective_model(case.collective), world, algorithms,
                      options=options)
    sweep_model = _measured_model(case, world)
    sweep = (compare(trace, sweep_model, world, algorithms, options=options)  # type: ignore[arg-type]
             .set_index("algorithm")["iteration_s"] if sweep_model is not None else None)
    rows = []
    for row in results.itertuples(index=False):
        reference = float(sweep[row.algorithm]) if sweep is not None else float("nan")
        rows.append({
            "compute": compute, "topology": case.name, "collective": case.collective,
            "nodes": topo.nodes, "ranks_per_node": topo.ranks_per_node, "world_size": world,
            "algorithm": row.algorithm, "iteration_s": float(row.iteration_s),
            "exposed_comm_s": float(row.exposed_comm_s),
            "measured_sweep": case.measured.stem if case.measured is not None else "",
            "sweep_iteration_s": reference,
            "vs_sweep_pct": 100.0 * (float(row.iteration_s) / reference - 1.0),
        })
    return rows


def topology_replay(computes: Mapping[str, str | Path], cases: Iterable[TopologyCase],
                    algorithms: Sequence[str], iterations: int = 5) -> pd.DataFrame:
    """Replay every compute trace on every topology case with every algorithm."""
    cases = list(cases)
    if not computes or not cases or not algorithms:
        raise ConfigError("topology replay: give at least one compute trace, one topology "
                          "and one algorithm")
    if len({c.name for c in cases}) != len(cases):
        raise ConfigError("topology replay: two topology cases share a name")
    options = ReplayOptions(iterations=iterations)
    rows: list[dict] = []
    for compute, path in computes.items():
        if not Path(path).is_file():
            raise InputError("compute trace not found", path=path)
        trace = with_forward(ComputeTrace.load(path), None)
        for case in cases:
            rows += _replay_rows(compute, trace, case, algorithms, options)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def paired(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (compute, nodes, ranks per node, algorithm) with ``flat_s``,
    ``hierarchical_s``, ``flat_over_hierarchical`` and the sweep replay ``sweep_s`` (the
    first non-empty one of the pair's cases)."""
    keys = ["compute", "nodes", "ranks_per_node", "algorithm"]
    seen = frame.groupby([*keys, "collective"]).size()
    if (seen > 1).any():
        dup = seen[seen > 1].index[0]
        raise InputError(f"two rows for {dict(zip([*keys, 'collective'], dup, strict=True))}: "
                         "one topology case per cluster shape and collective model",
                         field="topology")
    wide = frame.pivot_table(index=keys, columns="collective", values="iteration_s",
                             aggfunc="first", sort=False)
    for name in TOPOLOGY_COLLECTIVES:
        if name not in wide.columns:
            wide[name] = float("nan")
    sweep = frame.groupby(keys, sort=False)["sweep_iteration_s"].max()
    out = pd.DataFrame({"flat_s": wide["flat"], "hierarchical_s": wide["hierarchical"]})
    out["flat_over_hierarchical"] = out["flat_s"] / out["hierarchical_s"]
    out["sweep_s"] = sweep.reindex(out.index)
    return out.reset_index()


def topology_replay_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The paper's table: per model, cluster shape and algorithm, flat and hierarchical
    iteration times (ms), their ratio and the replay on the measured sweep (ms)."""
    header = ["model", "nodes x GPUs", "algorithm", "flat [ms]", "hierarchical [ms]",
              "flat / hier.", "measured sweep [ms]"]
    if frame.empty:
        return pd.DataFrame(columns=header), "lllrrrr"
    wide = paired(frame)
    out = pd.DataFrame({
        header[0]: wide["compute"].astype(str),
        header[1]: [f"{n} x {r}" for n, r in zip(wide["nodes"], wide["ranks_per_node"],
                                                  strict=True)],
        header[2]: wide["algorithm"].map(algorithm_label),
        header[3]: (wide["flat_s"] * 1e3).map(lambda v: fmt(v, 1)),
        header[4]: (wide["hierarchical_s"] * 1e3).map(lambda v: fmt(v, 1)),
        header[5]: wide["flat_over_hierarchical"].map(lambda v: fmt(v, 3)),
        header[6]: (wide["sweep_s"] * 1e3).map(lambda v: fmt(v, 1)),
    })
    return out, "lllrrrr"

