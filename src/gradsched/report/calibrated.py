"""The replay with the per-collective CPU cost the re-execution calibrated (rule
``replay_calibrated``): MG-WFBP against ``search`` and the contiguous optimum under it, and
the largest speed-up over WFBP under it, as prose macros, on the cases that pass the quoting
rule (:mod:`gradsched.report.quote_rule`)."""

from __future__ import annotations

import pandas as pd

from gradsched.report.algorithms import algorithm_sort_key, tie_text
from gradsched.report.latex import NA, latex_escape, number
from gradsched.report.quote_rule import quotable
from gradsched.ties import same_time

COMPARED = ("mgwfbp", "search", "contiguous_optimum")
"""The schedules whose gaps the prose quotes under the calibration."""


def calibrated_gap_macros(runs: pd.DataFrame | None) -> dict[str, str]:
    """MG-WFBP against ``search`` and the contiguous optimum when the replay charges the
    per-collective CPU cost the re-execution calibrated, with the executor's issue order
    (rule ``replay_calibrated``; ``runs``: long frame with ``case``, ``algorithm``,
    ``iteration_s``). Gaps are 100 (T_mgwfbp / T_ref - 1): negative where the reference
    replays slower than MG-WFBP. The ranges count only the cases whose three schedules all
    pass the quoting rule (``CalibratedNumQuoted`` of ``CalibratedNumCases``; the others,
    ``CalibratedNumOutsideDomain``, are mostly priced outside the measured sizes);
    ``CalibratedMaxSpeedupOverWfbp...``: the largest T_wfbp / T over those cases and every
    replayed schedule whose row passes the rule too."""
    keys = ["CalibratedNumCases", "CalibratedNumQuoted", "CalibratedMgwfbpSearchGapMinPct",
            "CalibratedMgwfbpSearchGapMaxPct", "CalibratedSearchSlowerCases",
            "CalibratedMgwfbpContigGapMinPct", "CalibratedMgwfbpContigGapMaxPct",
            "CalibratedNumOutsideDomain", "CalibratedMaxSpeedupOverWfbp",
            "CalibratedMaxSpeedupOverWfbpAlgorithm", "CalibratedMaxSpeedupOverWfbpCase"]
    out = dict.fromkeys(keys, NA)
    if runs is None or runs.empty:
        return out
    runs = runs.assign(ok=quotable(runs).to_numpy(dtype=bool))
    wide = runs.pivot_table(index="case", columns="algorithm", values="iteration_s",
                            aggfunc="first")
    if not set(COMPARED) <= set(wide.columns):
        return out
    compared = runs[runs["algorithm"].isin(COMPARED)]
    kept = compared.groupby("case")["ok"].all()
    kept = kept & (compared.groupby("case")["algorithm"].nunique() == len(COMPARED))
    out["CalibratedNumCases"] = str(len(wide))
    out["CalibratedNumQuoted"] = str(int(kept.sum()))
    out["CalibratedNumOutsideDomain"] = str(int((~kept).sum()))
    wide = wide.loc[kept[kept].index]
    if wide.empty:
        return out
    search = 100.0 * (wide["mgwfbp"] / wide["search"] - 1.0)
    contig = 100.0 * (wide["mgwfbp"] / wide["contiguous_optimum"] - 1.0)
    out["CalibratedMgwfbpSearchGapMinPct"] = number(float(search.min()))
    out["CalibratedMgwfbpSearchGapMaxPct"] = number(float(search.max()))
    out["CalibratedSearchSlowerCases"] = str(int((search < 0).sum()))
    out["CalibratedMgwfbpContigGapMinPct"] = number(float(contig.min()))
    out["CalibratedMgwfbpContigGapMaxPct"] = number(float(contig.max()))
    if "wfbp" in wide:
        ok = runs[runs["case"].isin(wide.index) & runs["ok"]]
        times = ok.pivot_table(index="case", columns="algorithm", values="iteration_s",
                               aggfunc="first")
        speed = times.drop(columns="wfbp").rdiv(times["wfbp"], axis=0).stack().dropna()
        if len(speed):
            case, top = speed.idxmax()[0], float(speed.max())
            tied = sorted((alg for (c, alg), v in speed.items()
                           if c == case and same_time(float(v), top)), key=algorithm_sort_key)
            out["CalibratedMaxSpeedupOverWfbp"] = number(top, 2)
            out["CalibratedMaxSpeedupOverWfbpAlgorithm"] = latex_escape(tie_text(tied))
            out["CalibratedMaxSpeedupOverWfbpCase"] = latex_escape(str(case))
    return out
