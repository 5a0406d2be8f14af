"""The replay with the per-collective CPU cost the re-execution calibrated (rule
``replay_calibrated``): MG-WFBP against ``search`` and the contiguous optimum under it, as
prose macros."""

from __future__ import annotations

import pandas as pd

from gradsched.report.collect import outside_domain_mask
from gradsched.report.latex import NA, number


def calibrated_gap_macros(runs: pd.DataFrame | None) -> dict[str, str]:
    """MG-WFBP against ``search`` and the contiguous optimum when the replay charges the
    per-collective CPU cost the re-execution calibrated, with the executor's issue order
    (rule ``replay_calibrated``; ``runs``: long frame with ``case``, ``algorithm``,
    ``iteration_s``). Gaps are 100 (T_mgwfbp / T_ref - 1): negative where the reference
    replays slower than MG-WFBP."""
    keys = ["CalibratedNumCases", "CalibratedMgwfbpSearchGapMinPct",
            "CalibratedMgwfbpSearchGapMaxPct", "CalibratedSearchSlowerCases",
            "CalibratedMgwfbpContigGapMinPct", "CalibratedMgwfbpContigGapMaxPct",
            "CalibratedNumOutsideDomain"]
    out = dict.fromkeys(keys, NA)
    if runs is None or runs.empty:
        return out
    wide = runs.pivot_table(index="case", columns="algorithm", values="iteration_s",
                            aggfunc="first")
    if not {"mgwfbp", "search", "contiguous_optimum"} <= set(wide.columns):
        return out
    search = 100.0 * (wide["mgwfbp"] / wide["search"] - 1.0)
    contig = 100.0 * (wide["mgwfbp"] / wide["contiguous_optimum"] - 1.0)
    out["CalibratedNumCases"] = str(len(wide))
    out["CalibratedMgwfbpSearchGapMinPct"] = number(float(search.min()))
    out["CalibratedMgwfbpSearchGapMaxPct"] = number(float(search.max()))
    out["CalibratedSearchSlowerCases"] = str(int((search < 0).sum()))
    out["CalibratedMgwfbpContigGapMinPct"] = number(float(contig.min()))
    out["CalibratedMgwfbpContigGapMaxPct"] = number(float(contig.max()))
    compared = runs[runs["algorithm"].isin(["mgwfbp", "search", "contiguous_optimum"])]
    outside = compared.assign(out=outside_domain_mask(compared)).groupby("case")["out"].any()
    out["CalibratedNumOutsideDomain"] = str(int(outside.sum()))
    return out
