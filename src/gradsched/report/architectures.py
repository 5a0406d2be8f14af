"""Hierarchical all-reduce and a parameter server run for real.

Input: ``paper/data/reexec/architectures/measured.json`` (``gradsched run`` on the emulated
cluster: the same DDP buckets reduced flat, hierarchically on 2 nodes x 2 ranks, and
through one parameter server with 2 workers; the replay's prediction of each run). Output:
a table of every run (measured median and p10-p90, predicted, error) and macros with the
measured and predicted ratios hierarchical / flat and PS / flat per link rate: a ratio of
two runs of the same launch conditions cancels much of the CPU contention that the absolute
errors carry (the compute of the replay is a single-process trace).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, camel, number

RUN_FIELDS = ("algorithm", "bandwidth", "layout", "median_s", "p10_s", "p90_s",
              "predicted_iteration_s", "plan_file", "workers")


def load_runs(path: str | Path) -> list[dict[str, Any]]:
    """The runs of the measured JSON, checked."""
    data = read_json(path, missing="architecture measurements not found")
    runs = data.get("measured") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs:
        raise InputError("expected a non-empty list 'measured'", path=path, field="measured")
    for i, run in enumerate(runs):
        missing = [f for f in RUN_FIELDS if f not in run]
        if missing:
            raise InputError(f"run {i} lacks {missing}", path=path, field=f"measured[{i}]")
        for f in ("median_s", "p10_s", "p90_s", "predicted_iteration_s"):
            value = run[f]
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    0 < value < float("inf")):
                raise InputError(f"{f} must be a finite number > 0, got {value!r}", path=path,
                                 field=f"measured[{i}].{f}")
    return runs


def kind_of(run: Mapping[str, Any]) -> str:
    """``flat``, ``hierarchical`` or ``ps`` (from the plan file's name) and the layout."""
    stem = Path(str(run["plan_file"])).stem
    for kind in ("hierarchical", "ps", "flat"):
        if stem.endswith(kind) or f"-{kind}." in str(run["plan_file"]):
            return kind
    return stem


def _group(run: Mapping[str, Any]) -> str:
    """Runs compared with each other: 2 nodes x 2 ranks, or 2 workers (PS vs flat)."""
    return "2x2" if int(run["workers"]) == 4 else "2w"


def architecture_table(runs: list[dict[str, Any]]) -> tuple[pd.DataFrame, str]:
    """One row per run: plan, link, layout, measured median (p10-p90), predicted, error."""
    rows = []
    for run in runs:
        meas, pred = float(run["median_s"]), float(run["predicted_iteration_s"])
        rows.append([kind_of(run), str(run["bandwidth"]), str(run["layout"]),
                     f"{fmt(meas, 2)} ({fmt(run['p10_s'], 2)}-{fmt(run['p90_s'], 2)})",
                     fmt(pred, 2), fmt(100.0 * (pred - meas) / meas, 1)])
    cols = ["reduction", "link", "layout", "measured [s] (p10-p90)", "predicted [s]",
            "error %"]
    return pd.DataFrame(rows, columns=cols), "lllrrr"


def ratios(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """Per link rate: measured and predicted hierarchical / flat (2 x 2) and PS / flat
    (2 workers); several rounds of a pair give the median of the rounds' ratios. Per pair
    also the number of rounds, the rounds whose measured ratio is below 1 and the rounds
    whose two p10-p90 ranges overlap (the measurement does not order that round's pair)."""
    out = []
    for rate in sorted({str(r["bandwidth"]) for r in runs}):
        for name, group, kind in (("hierarchical/flat", "2x2", "hierarchical"),
                                  ("ps/flat", "2w", "ps")):
            mine = [r for r in runs if str(r["bandwidth"]) == rate and _group(r) == group]
            num = [r for r in mine if kind_of(r) == kind]
            den = [r for r in mine if kind_of(r) == "flat"]
            if not num or not den:
                continue
            pairs = list(zip(sorted(num, key=lambda r: r.get("round", 0)),
                             sorted(den, key=lambda r: r.get("round", 0)), strict=False))
            measured = [float(a["median_s"]) / float(b["median_s"]) for a, b in pairs]
            out.append({"link": rate, "ratio": name,
                        "measured": statistics.median(measured),
                        "predicted": float(num[0]["predicted_iteration_s"])
                        / float(den[0]["predicted_iteration_s"]),
                        "rounds": len(pairs),
                        "rounds_below_one": sum(m < 1.0 for m in measured),
                        "rounds_overlapping": sum(_overlap(a, b) for a, b in pairs)})
    return pd.DataFrame(out, columns=["link", "ratio", "measured", "predicted", "rounds",
                                      "rounds_below_one", "rounds_overlapping"])


def _overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two runs' p10-p90 ranges overlap."""
    return float(a["p10_s"]) <= float(b["p90_s"]) and float(b["p10_s"]) <= float(a["p90_s"])


def architecture_macros(runs: list[dict] | None) -> dict[str, str]:
    """Hierarchical and PS runs on the emulated cluster (:mod:`gradsched.report.
    architectures`): measured and predicted ratios per link (``ArchHierFlat<Link>Meas``,
    ``...Pred``, ``ArchPsFlat<Link>...``), per ratio the rounds, those measured below 1 and
    those whose two p10-p90 ranges overlap (``...Rounds``, ``...RoundsBelowOne``,
    ``...RoundsOverlap``), and the range of the errors."""
    links = ("1gbit", "100mbit")
    out = {f"Arch{name}{camel(link)}{kind}": NA for name in ("HierFlat", "PsFlat")
           for link in links for kind in ("Meas", "Pred", "Rounds", "RoundsBelowOne",
                                          "RoundsOverlap")}
    out |= {"ArchErrMin": NA, "ArchErrMax": NA, "ArchNumRuns": NA}
    if not runs:
        return out
    for row in ratios(runs).itertuples(index=False):
        name = "HierFlat" if row.ratio.startswith("hierarchical") else "PsFlat"
        out[f"Arch{name}{camel(row.link)}Meas"] = number(float(row.measured), 2)
        out[f"Arch{name}{camel(row.link)}Pred"] = number(float(row.predicted), 2)
        out[f"Arch{name}{camel(row.link)}Rounds"] = str(int(row.rounds))
        out[f"Arch{name}{camel(row.link)}RoundsBelowOne"] = str(int(row.rounds_below_one))
        out[f"Arch{name}{camel(row.link)}RoundsOverlap"] = str(int(row.rounds_overlapping))
    errors = [100.0 * (float(r["predicted_iteration_s"]) - float(r["median_s"]))
              / float(r["median_s"]) for r in runs]
    out["ArchErrMin"] = number(min(errors), 0)
    out["ArchErrMax"] = number(max(errors), 0)
    out["ArchNumRuns"] = str(len(runs))
    return out
