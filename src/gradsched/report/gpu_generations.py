"""GPU generations: PyTorch DDP's default plan against the best plan found, per measured case
of the GPU families (K80, V100, A100/GH200, H200), and the family medians the paper quotes,
with the host-bound cases left out and the out-of-domain ones counted."""

from __future__ import annotations

import pandas as pd

from gradsched.report.collect import extrapolated_mask, outside_domain_mask
from gradsched.report.macro_text import NA, camel, number

GPU_FAMILIES = ("k80", "v100", "a100-gh200", "h200")
"""The GPU case families (config ``cases: family``), oldest GPU first: the paper compares how
exposed communication and the gain of the best plan change from one generation to the next."""


def gpu_case_table(collected: pd.DataFrame | None,
                   families: tuple[str, ...] = GPU_FAMILIES) -> pd.DataFrame:
    """One row per measured (not extrapolated) case of the GPU families: PyTorch DDP's
    default plan (``ddp``) against the best plan found (``best``, the oracle over every
    planner). ``ddp_exposed_pct`` = 100 exposed communication / iteration time of DDP's
    plan; ``best_gain_pct`` = 100 (T_ddp / T_best - 1); ``compute_ms`` = the trace's compute
    per iteration."""
    columns = ["family", "trace", "network", "world_size", "compute_ms", "ddp_ms", "best_ms",
               "ddp_exposed_pct", "best_gain_pct", "host_bound", "outside_domain"]
    if collected is None or collected.empty or "family" not in collected:
        return pd.DataFrame(columns=columns)
    part = collected[~extrapolated_mask(collected) & collected["family"].isin(families)]
    part = part.assign(outside=outside_domain_mask(part))
    rows = []
    for (family, trace, network, ws), case in part.groupby(
            ["family", "trace", "network", "world_size"], sort=True):
        by_alg = case.set_index("algorithm")
        if "ddp" not in by_alg.index or "best" not in by_alg.index:
            continue
        ddp, best = by_alg.loc["ddp"], by_alg.loc["best"]
        rows.append({
            "family": family, "trace": trace, "network": network, "world_size": int(ws),
            "compute_ms": 1e3 * float(ddp["compute_s"]),
            "ddp_ms": 1e3 * float(ddp["iteration_s"]),
            "best_ms": 1e3 * float(best["iteration_s"]),
            "ddp_exposed_pct": 100.0 * float(ddp["exposed_comm_s"]) / float(ddp["iteration_s"]),
            "best_gain_pct": 100.0 * (float(ddp["iteration_s"]) / float(best["iteration_s"])
                                      - 1.0),
            "host_bound": str(ddp.get("compute_bound_by", "")) == "host",
            "outside_domain": bool(ddp["outside"] or best["outside"]),
        })
    return pd.DataFrame(rows, columns=columns)


def gpu_generation_macros(collected: pd.DataFrame | None,
                          families: tuple[str, ...] = GPU_FAMILIES) -> dict[str, str]:
    """Per GPU family: the number of measured cases and the median and largest DDP exposed
    share and gain of the best plan over DDP's default (``Gen<Family>...``); per case of the
    newest family (the H200 traces captured here): its compute, exposed share and gain
    (``Gen<Trace><Network>...``)."""
    table = gpu_case_table(collected, families)
    out: dict[str, str] = {}
    for family in families:
        key = "Gen" + camel(family)
        rows = table[table["family"] == family]
        # a host-bound trace's compute does not reproduce across machines (the GPU waits on
        # kernel launches): shown per case, left out of the family's medians and maxima
        out[key + "NumHostBound"] = str(int(rows["host_bound"].sum()))
        rows = rows[~rows["host_bound"].astype(bool)]
        # stated next to the family's numbers: cases whose DDP or best plan is mostly priced
        # outside the sweep's measured sizes
        out[key + "NumOutsideDomain"] = str(int(rows["outside_domain"].sum()))
        out[key + "NumCases"] = str(len(rows)) if len(rows) else NA
        for column, name in (("ddp_exposed_pct", "DdpExposed"), ("best_gain_pct", "BestGain")):
            values = rows[column]
            out[f"{key}{name}MedianPct"] = number(float(values.median())) if len(rows) else NA
            out[f"{key}{name}MinPct"] = number(float(values.min())) if len(rows) else NA
            out[f"{key}{name}MaxPct"] = number(float(values.max())) if len(rows) else NA
    newest = table[table["family"] == families[-1]]
    for _, row in newest.iterrows():
        key = "Gen" + camel(row["trace"]) + camel(row["network"])
        out[key + "ComputeMs"] = number(float(row["compute_ms"]))
        out[key + "DdpExposedPct"] = number(float(row["ddp_exposed_pct"]))
        out[key + "BestGainPct"] = number(float(row["best_gain_pct"]))
    return out
