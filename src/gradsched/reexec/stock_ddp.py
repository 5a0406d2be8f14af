"""Stock PyTorch DDP running a planner's buckets (``ddp-list-<planner>``, through
``bucket_cap_mb_list``) against the other baselines, and ``best``'s gain split into the
executor's implementation effect and the schedule's.

Per case (input: the rows of ``measured.csv`` and the per-iteration rows of
``iterations.csv``; every time is the median over all timed iterations of the item, the
intervals are the 95 % percentile bootstrap of :mod:`gradsched.reexec.uncertainty`, each
item's iterations resampled within its rounds, the ratio recomputed per replicate):

* ``default_over_list``: PyTorch DDP as users get it (``ddp-native-default``, no
  ``bucket_cap_mb``; older data: 25 MiB) over the ``ddp-list`` item: > 1 = the per-bucket
  caps are faster;
* ``tuned_over_list``: the tuned uniform cap over the ``ddp-list`` item. The tuned cap
  (``tuned_ddp``) is the explicit ``bucket_cap_mb`` with the smallest measured median
  (DDP's default, whose first bucket is 1 MiB, is not a uniform cap); it is chosen once on
  the point estimates, not again in each replicate;
* ``best_over_list``: ``best`` through gradsched's executor over the ``ddp-list`` item;
* ``default_over_best`` = ``default_over_executor_ddp`` x ``executor_ddp_over_best``:
  ``best`` against PyTorch DDP, split into the executor running DDP's own plan (the
  ``ddp`` planner's, the same buckets as the default) against PyTorch DDP (the executor's
  implementation effect; > 1 = the executor is faster) and ``best`` against that
  executor run (the schedule's gain, both through the executor).

A case without a ``ddp-list`` item (data measured before it existed) keeps the
decomposition and leaves the list's columns empty (the report says "not measured").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gradsched.reexec.uncertainty import Replicates, bootstrap_medians, ratio_interval

LIST_PREFIX = "ddp-list-"
DEFAULTS = ("ddp-native-default", "ddp-native-25")  # DDP's default: own item, else 25 MiB
UNIFORM = re.compile(r"^ddp-native-(?P<cap>[0-9.eE+-]+)$")

RATIOS: dict[str, tuple[str, str]] = {
    "default_over_list": ("default", "list"),
    "tuned_over_list": ("tuned", "list"),
    "best_over_list": ("best", "list"),
    "default_over_best": ("default", "best"),
    "executor_ddp_over_best": ("executor_ddp", "best"),
    "default_over_executor_ddp": ("default", "executor_ddp"),
}
"""Ratio column -> (numerator role, denominator role): time over time."""

ROLES = ("list", "default", "tuned", "best", "executor_ddp")

STOCK_DDP_COLUMNS = (
    "case", "bandwidth", "world_size", "list_algorithm", "ddp_buckets_match", "tuned_ddp",
    *(f"{role}_measured_s" for role in ROLES),
    *(f"{name}{end}" for name in RATIOS for end in ("", "_lo", "_hi")),
)


def case_roles(group: pd.DataFrame) -> list[dict[str, str]]:
    """Per ``ddp-list`` algorithm of one case (one entry without a list item): the
    algorithm playing each role (``list``, ``default``, ``tuned``, ``best``,
    ``executor_ddp``), absent roles left out."""
    algs = group.set_index("algorithm")["measured_s"]
    base: dict[str, str] = {}
    default = next((a for a in DEFAULTS if a in algs.index), None)
    if default is not None:
        base["default"] = default
    uniform = [a for a in algs.index if UNIFORM.match(str(a))]
    if uniform:
        base["tuned"] = min(uniform, key=lambda a: (float(algs[a]), str(a)))
    for role, alg in (("best", "best"), ("executor_ddp", "ddp")):
        if alg in algs.index:
            base[role] = alg
    lists = sorted(str(a) for a in algs.index if str(a).startswith(LIST_PREFIX))
    return [base | {"list": a} for a in lists] or [base]


def _ratio(reps: Replicates | None, point: Mapping[str, float], num: str | None,
           den: str | None) -> tuple[float, float, float]:
    if num is None or den is None:
        return math.nan, math.nan, math.nan
    if reps is None:
        return point[num] / point[den], math.nan, math.nan
    return ratio_interval(reps, num, den)


def case_comparison(group: pd.DataFrame, iterations: pd.DataFrame | None
                    ) -> list[dict[str, Any]]:
    """The rows of one case (see the module docstring)."""
    case = str(group["case"].iloc[0])
    item = dict(zip(group["algorithm"].astype(str),
                    group["item"].astype(str) if "item" in group else group["algorithm"],
                    strict=True))
    roles_list = case_roles(group)
    used = sorted({item[a] for roles in roles_list for a in roles.values()})
    reps = bootstrap_medians(iterations, case, used) if iterations is not None else None
    by_alg = group.set_index("algorithm")
    point = dict(reps.point) if reps is not None else {
        item[a]: float(by_alg.at[a, "measured_s"]) for a in item}
    rows = []
    for roles in roles_list:
        items = {r: item[a] for r, a in roles.items()}
        row: dict[str, Any] = {
            "case": case, "bandwidth": str(group["bandwidth"].iloc[0]),
            "world_size": int(group["world_size"].iloc[0]),
            "list_algorithm": roles.get("list", ""), "tuned_ddp": roles.get("tuned", ""),
            "ddp_buckets_match": _match(by_alg, roles.get("list"))}
        for role in ROLES:
            row[f"{role}_measured_s"] = point[items[role]] if role in items else math.nan
        for name, (num, den) in RATIOS.items():
            value, lo, hi = _ratio(reps, point, items.get(num), items.get(den))
            row.update({name: value, f"{name}_lo": lo, f"{name}_hi": hi})
        rows.append(row)
    return rows


def _match(by_alg: pd.DataFrame, alg: str | None) -> Any:
    """The list item's ``ddp_buckets_match`` (from meta.json through collect), if known."""
    if alg is None or "ddp_buckets_match" not in by_alg:
        return None
    value = by_alg.at[alg, "ddp_buckets_match"]
    if pd.isna(value):
        return None
    return value == "True" if isinstance(value, str) else bool(value)


def stock_ddp_comparison(frame: pd.DataFrame, iterations: pd.DataFrame | None = None
                         ) -> pd.DataFrame:
    """One row per case and ``ddp-list`` item (one per case without one); intervals need
    ``iterations`` (NaN without)."""
    plans = frame.loc[frame["kind"] != "control"] if "kind" in frame else frame
    rows: list[dict[str, Any]] = []
    for _, group in plans.groupby("case", sort=False):
        rows.extend(case_comparison(group, iterations))
    return pd.DataFrame(rows, columns=list(STOCK_DDP_COLUMNS))
