"""The validation table of the collectives-at-scale section: each method's MAPE per world size
of every multi-scale series, fitted on the smallest scale (``gradsched fit --cross-world-size``
tables, one per method). Formatting only: the errors are computed by
:func:`gradsched.costmodel.crossws.cross_world_size`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gradsched.report.formatting import fmt

SUMMARY_ROWS = ("median", "worst")


def validation_table(cases: list[tuple[str, pd.DataFrame]]) -> tuple[pd.DataFrame, str]:
    """One row per (series, world size), one MAPE column per method (``cases``: label and
    cross-world-size table), then per series the median and the worst MAPE over the world
    sizes each method predicted (its fitted rows are residuals, marked ``fit``)."""
    labels = [label for label, _ in cases]
    long = pd.concat([frame.assign(method=label) for label, frame in cases],
                     ignore_index=True)
    rows = []
    for series, group in long.groupby("series", sort=True):
        sizes = group[["predict_world_size", "nodes"]].drop_duplicates().sort_values(
            "predict_world_size")
        for ws, nodes in sizes.itertuples(index=False):
            at = group[group["predict_world_size"] == ws]
            role = "fit" if (at["role"] == "fitted").any() else "predicted"
            row = {"series": str(series), "P [ranks]": str(int(ws)),
                   "nodes": str(int(nodes)), "role": role}
            for label in labels:
                hit = at[at["method"] == label]["mape_pct"]
                row[label] = fmt(float(hit.iloc[0]), 1) if len(hit) else "--"
            rows.append(row)
        for name, reduce in zip(SUMMARY_ROWS, (np.median, np.max), strict=True):
            row = {"series": str(series), "P [ranks]": name, "nodes": "", "role": "predicted"}
            for label in labels:
                pred = group[(group["method"] == label) & (group["role"] == "predicted")]
                row[label] = fmt(float(reduce(pred["mape_pct"])), 1) if len(pred) else "--"
            rows.append(row)
    columns = ["series", "P [ranks]", "nodes", "role", *labels]
    return pd.DataFrame(rows, columns=columns), "lrrl" + "r" * len(labels)
