"""``best`` against PyTorch DDP's default, the executor running DDP's own plan and DDP at
its fastest measured cap, and the executor's DDP plan against PyTorch DDP's default: per
re-execution case, the time ratio with its bootstrap interval (the medians of the iterations
resampled within rounds, :func:`gradsched.reexec.uncertainty.bootstrap_medians`, over the
case's non-control items, as ``reexec analyze`` draws them)."""

from __future__ import annotations

import pandas as pd

from gradsched.reexec.uncertainty import bootstrap_medians, percentile_interval

VERSUS = {"Default": ("ddp-native-default", "ddp-native-25"), "ExecDdp": ("ddp",)}
"""What ``best`` is compared with: PyTorch DDP as users get it (no ``bucket_cap_mb``; 25 MB
in older data) and the executor running DDP's own bucket plan (algorithm ``ddp``)."""


def item_of(case_rows: pd.DataFrame, algorithms: tuple[str, ...]) -> str | None:
    """The item of the first of ``algorithms`` that the case ran, or None."""
    items = dict(zip(case_rows["algorithm"].astype(str), case_rows["item"].astype(str),
                     strict=False))
    return next((items[a] for a in algorithms if a in items), None)


def best_versus_table(measured: pd.DataFrame | None, iterations: pd.DataFrame | None
                      ) -> pd.DataFrame:
    """Per re-execution case and reference (``Default``, ``ExecDdp``; :data:`VERSUS`;
    ``TunedCap``: PyTorch DDP at the fastest cap measured), and
    the executor's DDP plan against PyTorch DDP's default (``ExecDdpOverDefault``):
    ``ratio`` = T_reference / T_compared (above 1: the compared item measured faster) with
    its bootstrap interval (medians of the iterations resampled within rounds,
    :func:`gradsched.reexec.uncertainty.bootstrap_medians`, over the case's non-control
    items, as ``reexec analyze`` draws them)."""
    columns = ["case", "versus", "ratio", "ratio_lo", "ratio_hi"]
    if measured is None or measured.empty or iterations is None or iterations.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for case, group in measured.groupby("case", sort=True):
        plans = group.loc[group["kind"] != "control"]
        best = item_of(plans, ("best",))
        if best is None:
            continue
        reps = bootstrap_medians(iterations, str(case), plans["item"].astype(str).unique())
        refs = {name: item_of(plans, algs) for name, algs in VERSUS.items()}
        native = plans.loc[plans["kind"] == "ddp-native", "item"].astype(str).unique()
        if len(native):  # the tuned baseline: the fastest cap measured
            refs["TunedCap"] = min(sorted(native), key=lambda item: reps.point[item])
        pairs = [(name, ref, best) for name, ref in refs.items()]
        pairs.append(("ExecDdpOverDefault", refs["Default"], refs["ExecDdp"]))
        for name, ref, mine in pairs:
            if ref is None or mine is None:
                continue
            lo, hi = percentile_interval(reps.medians[ref] / reps.medians[mine])
            rows.append({"case": str(case), "versus": name,
                         "ratio": reps.point[ref] / reps.point[mine],
                         "ratio_lo": lo, "ratio_hi": hi})
    return pd.DataFrame(rows, columns=columns)
