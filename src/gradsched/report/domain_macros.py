"""The domain stated next to the claims: how many replay rows the maxima and medians leave
out (mostly priced outside the measured message sizes, :mod:`gradsched.costmodel.domain`, or
of a host-bound compute trace), and the headline case's out-of-range share."""

from __future__ import annotations

import pandas as pd

from gradsched.costmodel.domain import MOSTLY_OUTSIDE_PCT
from gradsched.report.collect import host_bound_mask, mostly_below_mask, outside_domain_mask
from gradsched.report.latex import NA, number

CASE_KEYS = ["trace", "network", "world_size"]


def domain_count_macros(collected: pd.DataFrame) -> dict[str, str]:
    """How many replay rows (and cases) the claims leave out: mostly priced outside the
    measured sizes (below the smallest / above the largest), or of a host-bound trace."""
    outside, host = outside_domain_mask(collected), host_bound_mask(collected)
    below = mostly_below_mask(collected)
    return {"DomainMostlyOutsidePct": number(MOSTLY_OUTSIDE_PCT, 0),
            "NumRowsOutsideDomain": str(int(outside.sum())),
            "NumRowsMostlyBelow": str(int(below.sum())),
            "NumRowsMostlyAbove": str(int((outside & ~below).sum())),
            "NumCasesOutsideDomain": str(len(collected.loc[outside, CASE_KEYS]
                                             .drop_duplicates())),
            "NumCasesHostBound": str(len(collected.loc[host, CASE_KEYS].drop_duplicates()))}


def headline_domain_macros(collected: pd.DataFrame, row: pd.Series | None) -> dict[str, str]:
    """The share of MG-WFBP's modelled communication in the headline case priced above and
    below the sizes its sweep measured (the domain quoted next to the headline)."""
    out = {"HeadlineMgwfbpAboveRangePct": NA, "HeadlineMgwfbpBelowRangePct": NA}
    if row is None or "comm_above_range_pct" not in collected:
        return out
    hit = collected[(collected["trace"] == row["trace"])
                    & (collected["network"] == row["network"])
                    & (collected["world_size"] == row["world_size"])
                    & (collected["algorithm"] == "mgwfbp")]
    if len(hit):
        out["HeadlineMgwfbpAboveRangePct"] = number(float(hit["comm_above_range_pct"].iloc[0]), 0)
        out["HeadlineMgwfbpBelowRangePct"] = number(float(hit["comm_below_range_pct"].iloc[0]), 0)
    return out
