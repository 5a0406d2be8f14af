"""The collectives' dtypes and the published layouts (``gradsched shard dtypes``,
:mod:`gradsched.experiments.sharded.dtypes_study`) as a table.

Per case, policy and layout: the replayed step, its change against FSDP2's default layout
with every collective in bf16 (the case's first row), the exposed communication, the
collectives' busy time, the peak of gathered parameters and unsharded gradients (GiB), the
bytes all-gathered and reduce-scattered per step (GB), and whether the world size was
measured or extrapolated by the comm model. Seconds and bytes in the input.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.formatting import fmt

GIB = 2**30
LABELS = {"fsdp2": "FSDP2 default", "torchtitan": "torchtitan",
          "torchtitan-2024": "torchtitan (2024)"}
HEADER = ["case", "P", "dtypes", "layout", "step [s]", "vs bf16 FSDP2 [%]", "exposed [s]",
          "comm busy [s]", "peak [GiB]", "all-gather [GB]", "reduce-scatter [GB]",
          "world size"]


def sharded_dtypes_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per (case, policy, layout) of a ``shard dtypes`` CSV (or several,
    concatenated)."""
    align = "lrll" + "r" * (len(HEADER) - 5) + "l"
    if frame.empty:
        return pd.DataFrame(columns=HEADER), align
    out = []
    for _, case in frame.groupby(["case", "world_size"], sort=False):
        base = float(case["iteration_s"].iloc[0])
        for row in case.itertuples(index=False):
            out.append([row.case, str(row.world_size), row.policy,
                        LABELS.get(row.layout, row.layout), fmt(row.iteration_s, 3),
                        fmt(100 * (row.iteration_s / base - 1), 2), fmt(row.exposed_comm_s, 3),
                        fmt(row.comm_busy_s, 3), fmt(row.gathered_peak_bytes / GIB, 1),
                        fmt(row.all_gather_bytes / 1e9, 0),
                        fmt(row.reduce_scatter_bytes / 1e9, 0), row.world_size_basis])
    return pd.DataFrame(out, columns=HEADER), align
