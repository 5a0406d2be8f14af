"""Concatenate per-case replay results into one table with ``trace``, ``network``, ``nodes``.

A *case* is one compute trace replayed against one comm trace (one world size) of one
network series; the replay writes one CSV per case with :data:`RESULT_COLUMNS`. Each case
also carries its compute ``family`` (which replay figure draws it) and its ``pairing``:
how the compute and the network belong together (:data:`PAIRINGS`). An *extrapolated*
case was replayed at a world size no sweep measured, on the network's cross-world-size
model (:class:`gradsched.costmodel.scaling.ScaledModel`); its ``comm`` is the largest sweep
of the network (for the ranks per node) and its ``comm_file`` says ``extrapolated``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gradsched.costmodel.domain import MOSTLY_OUTSIDE_PCT
from gradsched.errors import ConfigError, InputError
from gradsched.intermediates import REPLAY, read_csv_frame, read_intermediate

REPLAY_RESULT_COLUMNS = REPLAY.names
CASE_COLUMNS = ("trace", "network", "comm_file", "nodes", "family", "pairing", "extrapolated")
PAIRINGS = {
    "real": "real: compute and comm measured on the same system",
    "matched-gpu": "matched GPU type, different cluster: the compute trace ran on the same "
                   "GPU model as the network's nodes, but on another machine",
    "matched-generation": "same GPU generation, other cluster: the compute trace ran on a GPU "
                          "of the network nodes' generation (e.g. H200 compute on H100 or "
                          "GH200 nodes), but on another machine",
    "what-if": "what-if: compute and network from unrelated systems",
}
"""Allowed ``pairing`` labels of a case and what each means (config ``cases: pairing``)."""
COLLECTED_COLUMNS = CASE_COLUMNS + REPLAY_RESULT_COLUMNS


@dataclass(frozen=True)
class Case:
    """One replay case: compute trace name, network name, comm trace CSV, result CSV, the
    compute family it is drawn with and how compute and network are paired."""

    trace: str
    network: str
    comm: Path
    result: Path
    family: str = ""
    pairing: str = "what-if"
    extrapolated: bool = False

    def __post_init__(self) -> None:
        if self.pairing not in PAIRINGS:
            raise ConfigError(f"case {self.trace} x {self.network}: unknown pairing "
                              f"{self.pairing!r} (one of {', '.join(PAIRINGS)})")


def comm_nodes(path: str | Path) -> int:
    """The single node count of a comm trace CSV (an error names the file otherwise)."""
    frame = read_csv_frame(path, comment="#", usecols=["nodes"])
    values = sorted(frame["nodes"].dropna().unique())
    if len(values) != 1:
        raise InputError(f"expected one node count, found {values}", path=path, field="nodes")
    return int(values[0])


def extrapolated_nodes(reference: str | Path, world_size: int) -> int:
    """Nodes of ``world_size`` ranks at the ranks per node of a reference comm trace."""
    frame = read_csv_frame(reference, comment="#", usecols=["world_size", "nodes"])
    pairs = sorted({(int(w), int(n)) for w, n in zip(frame["world_size"], frame["nodes"],
                                                       strict=True)})
    if len(pairs) != 1:
        raise InputError(f"expected one (world_size, nodes), found {pairs}", path=reference,
                         field="world_size")
    world, nodes = pairs[0]
    return max(1, round(world_size * nodes / world))


def extrapolated_mask(frame: pd.DataFrame) -> pd.Series:
    """True for rows replayed beyond the sweeps; rows without the flag (results collected
    before it existed, or a missing value) are measured ones."""
    if "extrapolated" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["extrapolated"].map(lambda v: str(v).strip().lower() in ("true", "1"))


def outside_domain_mask(frame: pd.DataFrame) -> pd.Series:
    """True for rows whose modelled communication was mostly (more than
    :data:`~gradsched.costmodel.domain.MOSTLY_OUTSIDE_PCT`) priced outside the sizes their
    comm model measured; rows without the shares (collected before they existed, or a
    model that records no domain) are not marked."""
    if "comm_below_range_pct" not in frame or "comm_above_range_pct" not in frame:
        return pd.Series(False, index=frame.index)
    outside = (pd.to_numeric(frame["comm_below_range_pct"], errors="coerce")
               + pd.to_numeric(frame["comm_above_range_pct"], errors="coerce"))
    return (outside > MOSTLY_OUTSIDE_PCT).fillna(False).astype(bool)


def host_bound_mask(frame: pd.DataFrame) -> pd.Series:
    """True for rows whose compute trace is host-bound (``compute_bound_by == "host"``):
    their compute is set by the host's launch rate and does not reproduce across
    machines."""
    if "compute_bound_by" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["compute_bound_by"].astype(str) == "host"


def mostly_below_mask(frame: pd.DataFrame) -> pd.Series:
    """Rows of :func:`outside_domain_mask` priced more below the smallest measured size
    than above the largest."""
    if "comm_below_range_pct" not in frame or "comm_above_range_pct" not in frame:
        return pd.Series(False, index=frame.index)
    below = pd.to_numeric(frame["comm_below_range_pct"], errors="coerce")
    above = pd.to_numeric(frame["comm_above_range_pct"], errors="coerce")
    return outside_domain_mask(frame) & (below > above).fillna(False).astype(bool)


def read_csv_or_empty(path: str | Path) -> pd.DataFrame:
    """A CSV as a frame; an empty file (e.g. a concatenation of nothing) -> empty frame.
    The frame is checked as the intermediate its columns say it is
    (:func:`gradsched.intermediates.read_intermediate`)."""
    return read_intermediate(path, empty_ok=True, keep_default_na=False, na_values=[""])


def read_result(path: str | Path) -> pd.DataFrame:
    """Read one per-case replay CSV and check its columns, cells and physics
    (:data:`gradsched.intermediates.REPLAY`)."""
    return read_intermediate(path, (REPLAY,), keep_default_na=False, na_values=[""])


def collect_cases(cases: Iterable[Case]) -> pd.DataFrame:
    """One row per (case, algorithm), sorted by trace, network, world size, algorithm."""
    parts = []
    for case in cases:
        frame = read_result(case.result)
        if case.extrapolated:
            worlds = sorted(set(frame["world_size"].astype(int)))
            if len(worlds) != 1:
                raise InputError(f"expected one world size, found {worlds}", path=case.result,
                                 field="world_size")
            comm_file = f"extrapolated from {Path(case.comm).stem}"
            nodes = extrapolated_nodes(case.comm, worlds[0])
        else:
            comm_file, nodes = Path(case.comm).stem, comm_nodes(case.comm)
        frame.insert(0, "trace", case.trace)
        frame.insert(1, "network", case.network)
        frame.insert(2, "comm_file", comm_file)
        frame.insert(3, "nodes", nodes)
        frame.insert(4, "family", case.family)
        frame.insert(5, "pairing", case.pairing)
        frame.insert(6, "extrapolated", case.extrapolated)
        parts.append(frame[list(COLLECTED_COLUMNS)])
    if not parts:
        return pd.DataFrame(columns=list(COLLECTED_COLUMNS))
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["trace", "network", "world_size", "algorithm"],
                           kind="stable").reset_index(drop=True)
