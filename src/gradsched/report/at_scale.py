"""The at-scale table and macros: published step times of pure FSDP training against the
FSDP2 replay calibrated on each group's smallest GPU count, with the perfect-scaling
baseline beside (frames from :mod:`gradsched.experiments.at_scale.study`; formatting only).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.report.formatting import fmt

COLUMNS = ("group", "GPU", "P", "published [s]", "predicted [s]", "error [%]",
           "perfect scaling error [%]", "growth published [%]", "growth predicted [%]",
           "growth explained [%]")
NEEDED = ("source", "group", "gpu", "gpus", "calibration", "published_step_s",
          "predicted_step_s", "error_pct", "perfect_error_pct", "published_growth_pct",
          "predicted_growth_pct", "growth_explained_pct")
SUMMARY_KEYS = ("groups", "predicted_points", "median_abs_error_pct", "worst_abs_error_pct",
                "perfect_median_abs_error_pct", "perfect_worst_abs_error_pct",
                "optimistic_points", "growth_points", "growth_explained_median_pct",
                "growth_explained_pooled_pct")
MACROS = {"Groups": ("groups", 0), "Points": ("predicted_points", 0),
          "MedianErr": ("median_abs_error_pct", 1), "WorstErr": ("worst_abs_error_pct", 1),
          "PerfectMedianErr": ("perfect_median_abs_error_pct", 1),
          "PerfectWorstErr": ("perfect_worst_abs_error_pct", 1),
          "Optimistic": ("optimistic_points", 0), "GrowthPoints": ("growth_points", 0),
          "GrowthMedian": ("growth_explained_median_pct", 1),
          "GrowthPooled": ("growth_explained_pooled_pct", 1)}


def load_points_frame(path: str | Path) -> pd.DataFrame:
    """The study's per-point CSV, with the columns the table needs."""
    path = Path(path)
    if not path.is_file():
        raise InputError("at-scale results CSV not found", path=path)
    frame = pd.read_csv(path)
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s): {', '.join(missing)}", path=path, row=0,
                         field=missing[0])
    if frame["variant"].nunique() > 1:
        raise InputError("more than one variant; the table shows one", path=path,
                         field="variant")
    return frame


def at_scale_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per point: the calibration point of each group marked, the others with
    their error, perfect scaling's, and the growths."""
    rows = []
    for r in frame.itertuples(index=False):
        short = str(r.group).removeprefix(f"{r.source}-")
        calibrated = str(r.calibration).lower() == "true"
        rows.append([f"{r.source}: {short}", str(r.gpu).upper(), str(int(r.gpus)),
                     fmt(r.published_step_s, 3), fmt(r.predicted_step_s, 3),
                     "calibrated" if calibrated else fmt(r.error_pct, 1),
                     "" if calibrated else fmt(r.perfect_error_pct, 1),
                     "" if calibrated else fmt(r.published_growth_pct, 1),
                     "" if calibrated else fmt(r.predicted_growth_pct, 1),
                     "" if calibrated else fmt(r.growth_explained_pct, 0)])
    return pd.DataFrame(rows, columns=list(COLUMNS)), "llrrrrrrrr"


def load_summary(path: str | Path) -> dict[str, object]:
    """The study's summary JSON, checked for the keys the macros quote."""
    data = read_json(path, missing="at-scale summary JSON not found")
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path, field="(top level)")
    for key in SUMMARY_KEYS:
        if key not in data:
            raise InputError(f"missing '{key}'", path=path, field=key)
    return data


def at_scale_macros(summary: Mapping[str, object]) -> dict[str, str]:
    """``AtScale<Name>`` macros of the summary's numbers."""
    return {f"AtScale{name}": fmt(summary[key], digits) for name, (key, digits) in MACROS.items()}
