"""The domain stated next to the claims: how many replay rows the maxima and medians leave
out under the quoting rule (:mod:`gradsched.report.quote_rule`: mostly priced outside the
measured message sizes, of a host-bound compute trace, or replayed without the calibration
that exists for their link), and the headline case's out-of-range share."""

from __future__ import annotations

import pandas as pd

from gradsched.costmodel.domain import MOSTLY_OUTSIDE_PCT
from gradsched.report.collect import host_bound_mask, mostly_below_mask, outside_domain_mask
from gradsched.report.latex import NA, number
from gradsched.report.quote_rule import exclusion_reasons

CASE_KEYS = ["trace", "network", "world_size"]


def domain_count_macros(collected: pd.DataFrame,
                        calibrated: frozenset[str] = frozenset()) -> dict[str, str]:
    """How many replay rows (and cases) the claims leave out: mostly priced outside the
    measured sizes (below the smallest / above the largest), of a host-bound trace, or
    replayed without the per-collective cost calibrated for their link (``calibrated``: the
    links a calibrated replay exists for)."""
    outside, host = outside_domain_mask(collected), host_bound_mask(collected)
    below = mostly_below_mask(collected)
    uncalibrated = (exclusion_reasons(collected, calibrated) == "uncalibrated").to_numpy()
    return {"NumRowsUncalibrated": str(int(uncalibrated.sum())),
            "NumCasesUncalibrated": str(len(collected.loc[uncalibrated, CASE_KEYS]
                                            .drop_duplicates())),
            "DomainMostlyOutsidePct": number(MOSTLY_OUTSIDE_PCT, 0),
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
