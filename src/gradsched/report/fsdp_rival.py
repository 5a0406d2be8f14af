"""Tables of the accumulation-mode advisor (``gradsched shard accumulate``,
:mod:`gradsched.experiments.sharded.accumulation`) and of the sharded optimum against
PyTorch's FSDP-unit MILP (``gradsched shard rival``, :mod:`gradsched.experiments.sharded.rival`;
the run of its plans, :func:`gradsched.experiments.sharded.rival.measured_rows`).
Formatting only: seconds and bytes in, seconds and MiB shown; ``--`` for no value.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.formatting import fmt

MIB = 2**20
PLANS = {"fsdp2": "FSDP2 default", "sharded-optimum": "optimum", "fsdp-milp": "FSDP MILP"}

ACCUM_HEADER = ["trace", "network", "mesh", "k", "mode", "step [s]", "all-gathers",
                "reduce-scatters", "all-reduces", "peak [MiB]", "above sync-every [MiB]",
                "vs fastest [x]"]


def _mesh(r: dict) -> str:
    """``R x S`` (replicas x shard group); a CSV from before the mesh column: ``1 x P``."""
    replicate = r.get("replicate")
    if replicate is None or pd.isna(replicate):
        return f"1 x {r['world_size']}"
    return f"{int(replicate)} x {int(r['shard'])}"


def accumulation_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per case, mesh and mode of concatenated ``shard accumulate`` CSVs (all-reduces
    ``--`` without replicas)."""
    align = "llrrl" + "r" * (len(ACCUM_HEADER) - 5)
    rows = []
    for r in frame.to_dict("records"):
        reduces = r.get("all_reduces")
        hsdp = _mesh(r).split(" x ")[0] != "1"
        rows.append([r["case"], r["network"], _mesh(r), str(r["grad_accum"]), r["mode"],
                     fmt(r["step_s"], 3), str(r["all_gathers"]), str(r["reduce_scatters"]),
                     str(int(reduces)) if hsdp and reduces is not None else "--",
                     fmt(r["gathered_peak_bytes"] / MIB, 0),
                     fmt(r["extra_peak_bytes"] / MIB, 0), fmt(r["step_over_fastest"], 3)])
    return pd.DataFrame(rows, columns=ACCUM_HEADER), align


RIVAL_HEADER = ["trace", "network", "cap", "plan", "units", "prefetch f/b", "step [s]",
                "peak [MiB]", "fits cap", "vs optimum [x]", "MILP status"]


def rival_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per case, cap and plan of concatenated ``shard rival`` CSVs."""
    align = "llll" + "r" * 4 + "lrl"
    rows = []
    for r in frame.to_dict("records"):
        status = r.get("milp_status")
        rows.append([r["case"], r["network"], r["cap"], PLANS.get(r["algorithm"],
                                                                   r["algorithm"]),
                     str(r["n_units"]), f"{r['forward_prefetch']}/{r['backward_prefetch']}",
                     fmt(r["step_s"], 3), fmt(r["gathered_peak_bytes"] / MIB, 0),
                     "yes" if bool(r["fits_cap"]) else "no", fmt(r["step_over_optimum"], 3),
                     status if isinstance(status, str) else ""])
    return pd.DataFrame(rows, columns=RIVAL_HEADER), align


MEASURED_HEADER = ["cap", "plan", "iterations", "median [s]", "p10--p90 [s]",
                   "vs FSDP2 [x]"]


def rival_measured_table(rows: list[dict]) -> tuple[pd.DataFrame, str]:
    """One row per plan run (:func:`gradsched.experiments.sharded.rival.measured_rows`)."""
    out = [[r["cap"], PLANS.get(r["algorithm"], r["algorithm"]), str(r["iters"]),
            fmt(r["measured_s"], 3), f"{fmt(r['measured_p10_s'], 3)}--"
            f"{fmt(r['measured_p90_s'], 3)}", fmt(r["speedup_vs_fsdp2"], 3)] for r in rows]
    return pd.DataFrame(out, columns=MEASURED_HEADER), "llrrrr"
