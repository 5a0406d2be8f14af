"""Column dictionaries of the two trace kinds (compute and comm).

The dictionaries are the single source of truth: validation reads them, and
``traces/README.md`` is generated from them (``gradsched traces columns``).
Units are seconds and bytes everywhere; every column name says its unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["str", "int", "float", "bool"]


@dataclass(frozen=True)
class Column:
    """One CSV column: its type, whether it is required, its unit and meaning."""

    name: str
    kind: Kind
    required: bool
    unit: str
    meaning: str
    example: str
    minimum: float | None = None  # inclusive lower bound for numbers
    positive: bool = False  # strictly greater than zero
    choices: tuple[str, ...] | None = None


COLLECTIVES: tuple[str, ...] = (
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "p2p",
)
"""Collective names of a comm trace. ``p2p`` is one point-to-point message of ``bytes`` from
one rank to another (``world_size`` = 2, the two ranks): ``time_s`` is its one-way time (half
the median ping-pong round trip, as OSU's osu_latency reports it), ``busbw_Bps`` = ``algbw_Bps``."""

COMPUTE_COLUMNS: tuple[Column, ...] = (
    Column("name", "str", True, "-", "gradient tensor (parameter) name, unique", "conv1.weight"),
    Column("layer", "int", True, "-", "index of the owning layer in forward order "
           "(0 = input side); non-decreasing down the file", "0", minimum=0),
    Column("numel", "int", True, "elements", "number of elements of the gradient", "9408",
           positive=True),
    Column("bytes", "int", True, "bytes", "size of the gradient in bytes (numel x element size)",
           "37632", positive=True),
    Column("forward_s", "float", True, "s", "forward time attributed to this tensor (a layer's "
           "forward time is the sum over its rows)", "0.00012", minimum=0.0),
    Column("backward_s", "float", True, "s", "backward compute time spent between the previous "
           "gradient becoming ready (in ready_order) and this one", "0.00031", minimum=0.0),
    Column("ready_order", "int", True, "-", "position at which this gradient becomes ready in "
           "backward (0 = first ready); a permutation of 0..n-1", "160", minimum=0),
    Column("update_s", "float", False, "s", "optimizer update time of this tensor (0 if absent)",
           "0.000004", minimum=0.0),
    Column("forward_p10_s", "float", False, "s", "10th percentile of forward_s over iterations",
           "0.00011", minimum=0.0),
    Column("forward_p90_s", "float", False, "s", "90th percentile of forward_s over iterations",
           "0.00014", minimum=0.0),
    Column("backward_p10_s", "float", False, "s", "10th percentile of backward_s", "0.00029",
           minimum=0.0),
    Column("backward_p90_s", "float", False, "s", "90th percentile of backward_s", "0.00035",
           minimum=0.0),
    Column("host_forward_s", "float", False, "s", "host (CPU) time the launching thread spends "
           "on this tensor's forward ops, taken like forward_s (on the layer's first row): "
           "each op from its start to the next op's start, less waits for the GPU; with "
           "host_backward_s (both or neither)", "0.00004", minimum=0.0),
    Column("host_backward_s", "float", False, "s", "host time of the backward ops taken like "
           "backward_s (after the previous gradient's AccumulateGrad up to this one's), less "
           "waits for the GPU", "0.00009", minimum=0.0),
    Column("forward_launches", "int", False, "launches", "GPU activities (kernels, memcpy, "
           "memset; not NCCL) the ops of forward_s launch", "6", minimum=0),
    Column("backward_launches", "int", False, "launches", "GPU activities the ops of "
           "backward_s launch", "11", minimum=0),
)
HOST_COLUMNS: tuple[str, ...] = ("host_forward_s", "host_backward_s")
"""The host columns: a trace has both or neither (the host-aware replay needs both)."""

COMM_COLUMNS: tuple[Column, ...] = (
    Column("collective", "str", True, "-", "collective operation", "all_reduce",
           choices=COLLECTIVES),
    Column("backend", "str", True, "-", "communication library (nccl, rccl, mpi, gloo, ...)",
           "nccl"),
    Column("algorithm", "str", False, "-", "collective algorithm: `default` (the library's own "
           "choice) or one of gradsched's (ring, lp, mst, rd, rhd, ...)", "default"),
    Column("world_size", "int", True, "ranks", "number of ranks taking part", "16", positive=True),
    Column("nodes", "int", True, "nodes", "number of machines the ranks span", "2", positive=True),
    Column("in_place", "bool", True, "-", "1 if the operation was in place, else 0", "0"),
    Column("bytes", "int", True, "bytes", "message size per rank, as nccl-tests 'size'",
           "1048576", positive=True),
    Column("time_s", "float", True, "s", "time of one operation (median or mean, as the source "
           "gives; see metadata 'statistic')", "0.0001465", positive=True),
    Column("time_min_s", "float", False, "s", "minimum time when the source gives it",
           "0.000140", positive=True),
    Column("time_max_s", "float", False, "s", "maximum time when the source gives it",
           "0.000151", positive=True),
    Column("algbw_Bps", "float", False, "bytes/s", "algorithm bandwidth bytes / time_s",
           "7.16e9", minimum=0.0),
    Column("busbw_Bps", "float", False, "bytes/s", "bus bandwidth: algbw x the collective's "
           "factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather/reduce_scatter, 1 for "
           "broadcast/reduce/p2p)", "13.42e9",
           minimum=0.0),
)

COMM_KEY: tuple[str, ...] = (
    "collective", "backend", "algorithm", "world_size", "nodes", "in_place", "bytes",
)
COMM_SERIES: tuple[str, ...] = COMM_KEY[:-1]


def column_dictionary_markdown(columns: tuple[Column, ...]) -> str:
    """Render a column dictionary as a Markdown table."""
    lines = [
        "| column | type | required | unit | meaning | example |",
        "|---|---|---|---|---|---|",
    ]
    for col in columns:
        meaning = col.meaning
        if col.choices:
            meaning += " (one of: " + ", ".join(col.choices) + ")"
        lines.append(
            f"| `{col.name}` | {col.kind} | {'yes' if col.required else 'no'} | {col.unit} | "
            f"{meaning} | `{col.example}` |"
        )
    return "\n".join(lines) + "\n"
