"""All-reduce against parameter servers, replayed: the table of the frame that
:func:`gradsched.experiments.ps.ps_replay` returns.

:func:`ps_replay_table` sets each case's architectures side by side, the PS planners in
the column of their all-reduce counterpart (``bsp-ps`` under synchronous SGD, ``wfbp-ps``
under WFBP, ``bytescheduler-ps`` under ByteScheduler). Seconds; the table shows seconds too.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.formatting import fmt

COLUMN_OF = {"syncsgd": "sync", "bsp-ps": "sync", "wfbp": "WFBP", "wfbp-ps": "WFBP",
             "mgwfbp": "MG-WFBP", "bytescheduler": "ByteScheduler",
             "bytescheduler-ps": "ByteScheduler", "ddp": "DDP buckets"}


def ps_replay_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Per case and architecture, each planner column's iteration time [s]; the last
    column is the architecture's fastest over the all-reduce side's fastest."""
    cols = list(dict.fromkeys(COLUMN_OF.values()))
    header = ["model", "network", "P", "architecture", *[f"{c} [s]" for c in cols],
              "best / best all-reduce"]
    if frame.empty:
        return pd.DataFrame(columns=header), "llrl" + "r" * (len(header) - 4)
    out = []
    keys = ["compute", "network", "world_size"]
    for key, case in frame.groupby(keys, sort=False):
        ar_best = case.loc[case["architecture"] == "all-reduce", "iteration_s"].min()
        for arch, group in case.groupby("architecture", sort=False):
            by_col = {COLUMN_OF[a]: t for a, t in zip(group["algorithm"], group["iteration_s"],
                                                      strict=True)}
            out.append([str(key[0]), str(key[1]), str(key[2]), str(arch),
                        *[fmt(by_col.get(c), 2) for c in cols],
                        fmt(group["iteration_s"].min() / ar_best, 3)])
    return pd.DataFrame(out, columns=header), "llrl" + "r" * (len(header) - 4)
