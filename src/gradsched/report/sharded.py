"""Sharded data parallelism, replayed: the table of :func:`gradsched.experiments.sharded.compare`
rows over several cases.

Per case and planner: units (besides the root), prefetch depths (forward / backward),
resharding, the iteration time, the exposed communication share, the peak of gathered
parameters and gradients in flight (MiB), the speedup over FSDP2's defaults and the gap to
the lower bound. Seconds and bytes in the input; the table shows seconds and MiB.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.tables import fmt

MIB = 2**20
LABELS = {"fsdp2": "FSDP2 default", "fsdp2-saturation": "compiler cap",
          "fsdp2-cap": "25 MiB units", "sharded-optimum": "optimum"}
HEADER = ["model", "network", "P", "semantics", "plan", "units", "prefetch f/b", "reshard",
          "iteration [s]", "exposed [%]", "peak [MiB]", "vs FSDP2 [x]", "above bound [%]"]


def sharded_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per (case, planner) of a ``gradsched report sharded`` CSV."""
    align = "llrl" + "l" + "r" * (len(HEADER) - 5)
    if frame.empty:
        return pd.DataFrame(columns=HEADER), align
    out = []
    for _, case in frame.groupby(["compute", "network", "world_size", "semantics"], sort=False):
        default = case.loc[case["algorithm"] == "fsdp2", "iteration_s"]
        base = float(default.iloc[0]) if len(default) else float("nan")
        for row in case.itertuples(index=False):
            out.append([row.compute, row.network, str(row.world_size), row.semantics,
                        LABELS.get(row.algorithm, row.algorithm), str(row.n_units),
                        f"{row.forward_prefetch}/{row.backward_prefetch}",
                        str(row.reshard_after_forward).lower(), fmt(row.iteration_s, 3),
                        fmt(100 * row.exposed_comm_s / row.iteration_s, 1),
                        fmt(row.gathered_peak_bytes / MIB, 0), fmt(base / row.iteration_s, 3),
                        fmt(100 * (row.iteration_s / row.lower_bound_s - 1), 1)])
    return pd.DataFrame(out, columns=HEADER), align
