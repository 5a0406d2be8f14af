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
LABELS = {"fsdp2": "FSDP2 default", "fsdp2-noreshard": "FSDP2 default, no reshard",
          "fsdp2-saturation": "compiler cap", "fsdp2-cap": "25 MiB units",
          "zero3": "ZeRO-3 defaults", "sharded-optimum": "optimum",
          "sharded-optimum-capped": "optimum, FSDP2's peak"}
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


MEASURED_HEADER = ["model", "network", "P", "plan", "units", "reshard", "measured [s]",
                   "p10--p90 [s]", "predicted [s]", "error [%]", "unscaled error [%]",
                   "vs FSDP2 [x]", "vs no reshard [x]", "peak pred. [MiB]",
                   "peak meas. [MiB]", "units as planned"]


def sharded_measured_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per case and plan of the sharded re-execution (``gradsched shard measure``'s
    ``measured.csv`` files, concatenated): measured median and p10--p90, the blocking
    replay's prediction on the compute trace scaled to the compute-only control and its
    error, the error of the replay on the trace as committed, the speedup over FSDP2's
    defaults and over FSDP2's default units without resharding (``fsdp2-noreshard``) with
    their bootstrap intervals, the predicted peak of gathered parameters and gradients and
    the measured peak of CPU memory allocated during an iteration (MiB; ``--`` where the
    case did not measure it), and whether FSDP2 formed the plan's units."""
    align = "llrl" + "r" * (len(MEASURED_HEADER) - 5) + "l"
    if frame.empty:
        return pd.DataFrame(columns=MEASURED_HEADER), align
    out = []
    for row in frame.to_dict("records"):
        out.append([f"{row['model']} b{row['batch_size']}", row["network"],
                    str(row["world_size"]), LABELS.get(row["algorithm"], row["algorithm"]),
                    str(row["n_units"]), str(row["reshard_after_forward"]).lower(),
                    fmt(row["measured_s"], 3),
                    f"{fmt(row['measured_p10_s'], 3)}--{fmt(row['measured_p90_s'], 3)}",
                    fmt(row["predicted_s"], 3), fmt(row["error_pct"], 1),
                    fmt(row["error_raw_pct"], 1), _interval(row, "speedup_vs_fsdp2",
                                                            "speedup_low", "speedup_high"),
                    _interval(row, "speedup_vs_noreshard", "speedup_vs_noreshard_low",
                              "speedup_vs_noreshard_high"),
                    fmt(row["predicted_peak_bytes"] / MIB, 1),
                    fmt(row.get("measured_peak_bytes", float("nan")) / MIB, 1),
                    "yes" if str(row["units_match"]) == "True" else "no"])
    return pd.DataFrame(out, columns=MEASURED_HEADER), align


def _interval(row: dict, point: str, low: str, high: str) -> str:
    """``x [low, high]`` (two decimals: the table must fit a page at 7 pt), or the missing
    mark where the row has no such ratio (a case measured before the column existed, or
    without ``fsdp2-noreshard``)."""
    value = row.get(point, float("nan"))
    if fmt(value) == fmt(float("nan")):
        return fmt(float("nan"))
    return f"{fmt(value)} [{fmt(row[low])}, {fmt(row[high])}]"
