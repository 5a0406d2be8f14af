"""The at-scale table and macros: published step times of pure FSDP training against the
FSDP2 replay calibrated on each group's smallest GPU count, with the perfect-scaling
baseline beside (frames from :mod:`gradsched.experiments.at_scale.study`; formatting only).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import read_csv_frame
from gradsched.io import read_json
from gradsched.report.formatting import fmt

SOURCES = {"llm-foundry": "LF", "dgxc-maxtext": "MaxText", "torchtitan": "TT",
           "kempnerforge": "KF"}
"""Short names of the sources in the table (data/external/at-scale/README.md)."""
COLUMNS = ("group", "GPU", "P: calibrated: predicted", "MFU [%]", "error [%]",
           "perfect scaling [%]", "growth published [%]", "growth predicted [%]",
           "explained [%]")
"""One row per group; the last five columns list one value per predicted GPU count, in the
order of the third column."""
NEEDED = ("source", "group", "gpu", "gpus", "calibration", "published_step_s",
          "predicted_step_s", "error_pct", "perfect_error_pct", "published_growth_pct",
          "predicted_growth_pct", "growth_explained_pct")
SUMMARY_KEYS = ("groups", "predicted_points", "median_abs_error_pct", "worst_abs_error_pct",
                "perfect_median_abs_error_pct", "perfect_worst_abs_error_pct",
                "optimistic_points", "growth_points", "growth_explained_median_pct",
                "growth_explained_pooled_pct", "largest_published_growth_median_pct",
                "largest_predicted_growth_median_pct", "max_exposed_comm_s",
                "published_step_min_s", "published_step_max_s", "growth_floor_pct",
                "extrapolated_world_size_points", "outside_sizes_points")
MACROS = {"Groups": ("groups", 0), "Points": ("predicted_points", 0),
          "MedianErr": ("median_abs_error_pct", 1), "WorstErr": ("worst_abs_error_pct", 1),
          "PerfectMedianErr": ("perfect_median_abs_error_pct", 1),
          "PerfectWorstErr": ("perfect_worst_abs_error_pct", 1),
          "Optimistic": ("optimistic_points", 0), "GrowthPoints": ("growth_points", 0),
          "GrowthMedian": ("growth_explained_median_pct", 1),
          "GrowthPooled": ("growth_explained_pooled_pct", 1),
          "LargestGrowthPublished": ("largest_published_growth_median_pct", 1),
          "LargestGrowthPredicted": ("largest_predicted_growth_median_pct", 1),
          "MaxExposedComm": ("max_exposed_comm_s", 2),
          "StepMin": ("published_step_min_s", 1), "StepMax": ("published_step_max_s", 0),
          "GrowthFloor": ("growth_floor_pct", 0),
          "ExtrapolatedPoints": ("extrapolated_world_size_points", 0),
          "OutsideSizesPoints": ("outside_sizes_points", 0),
          "SyncPointsMedian": ("sync_points_median", 0),
          "SyncPointsMax": ("sync_points_max", 0),
          "UnitSlackMedian": ("unit_slack_min_pct_median", 0),
          "UnitBindingIfStepCv": ("unit_sync_binding_points", 0),
          "StragglerStepCv": ("straggler_step_cv", 3),
          "UnitJitterCv": ("unit_jitter_cv", 4),
          "UnitJitterValidationCv": ("unit_jitter_validation_cv", 3),
          "UnitJitterValidationErr": ("unit_jitter_validation_error_pct", 0),
          "UnitJitterStepKernelCv": ("unit_jitter_step_kernel_cv", 4),
          "UnitJitterBinding": ("unit_jitter_binding_points", 0),
          "UnitJitterValidationBinding": ("unit_jitter_validation_binding_points", 0),
          "UnitSyncWaitMax": ("unit_sync_wait_max_pct", 1)}
"""``AtScale<Name>`` macro -> (summary key, digits). The keys beyond :data:`SUMMARY_KEYS`
(the per-unit synchronisation check, ``gradsched.experiments.at_scale.sync``; the unit-jitter
ones only with ``--unit-jitter``) print as missing where a summary lacks them."""


def load_points_frame(path: str | Path) -> pd.DataFrame:
    """The study's per-point CSV, with the columns the table needs."""
    path = Path(path)
    if not path.is_file():
        raise InputError("at-scale results CSV not found", path=path)
    frame = read_csv_frame(path)
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s): {', '.join(missing)}", path=path, row=0,
                         field=missing[0])
    if frame["variant"].nunique() > 1:
        raise InputError("more than one variant; the table shows one", path=path,
                         field="variant")
    return frame


def _values(column: pd.Series, digits: int) -> str:
    return "/".join(fmt(v, digits) for v in column)


def group_label(source: str, group: str) -> str:
    """``LF: a10040-mpt-125m-mb26`` for group ``llm-foundry-a10040-mpt-125m-s2048-mb26``
    (the source abbreviated, llm-foundry's one sequence length dropped)."""
    rest = group.removeprefix(f"{source}-")
    if source == "llm-foundry":
        rest = rest.replace("-s2048", "")
    return f"{SOURCES.get(source, source)}: {rest}"


def at_scale_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per group: its calibration count and utilisation, then per predicted count
    the error, perfect scaling's error, and the published and predicted growths with the
    share explained (``-`` where undefined: :mod:`gradsched.experiments.at_scale.growth`)."""
    rows = []
    for name, members in frame.groupby("group", sort=False):
        members = members.sort_values("gpus")
        calibrated = members["calibration"].astype(str).str.lower() == "true"
        first, pred = members[calibrated], members[~calibrated]
        if len(first) != 1:
            raise InputError(f"group {name!r} has {len(first)} calibration points, not one",
                             field="calibration")
        source = str(first["source"].iloc[0])
        rows.append([
            group_label(source, str(name)),
            str(first["gpu"].iloc[0]).upper(),
            f"{int(first['gpus'].iloc[0])}: "
            + ", ".join(str(int(g)) for g in pred["gpus"]),
            fmt(100 * float(first["mfu"].iloc[0]), 1),
            _values(pred["error_pct"], 1), _values(pred["perfect_error_pct"], 1),
            _values(pred["published_growth_pct"], 1), _values(pred["predicted_growth_pct"], 1),
            _values(pred["growth_explained_pct"], 0)])
    return pd.DataFrame(rows, columns=list(COLUMNS)), "lllrrrrrr"


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
    return {f"AtScale{name}": fmt(summary.get(key), digits)
            for name, (key, digits) in MACROS.items()}


VARIANT_COLUMNS = ("variant", "comm models", "overlap slowdown", "stragglers",
                   "unit syncs", "points",
                   "median |error| [%]", "worst |error| [%]", "perfect scaling median [%]",
                   "perfect scaling worst [%]", "optimistic", "growth explained median [%]",
                   "growth explained pooled [%]")


def variants_table(summaries: list[Mapping[str, object]]) -> tuple[pd.DataFrame, str]:
    """One row per variant of the study (its summary JSON): its comm models and switches,
    and what they give, beside perfect scaling (the same for every variant of one data
    set), so each switch's effect is one row's difference."""
    rows = [[str(s.get("variant", "")), str(s.get("comm_models", "")),
             str(s.get("overlap_slowdown", "")), str(s.get("stragglers", "")),
             str(s.get("unit_stragglers", "off")), fmt(s["predicted_points"], 0),
             fmt(s["median_abs_error_pct"], 1),
             fmt(s["worst_abs_error_pct"], 1), fmt(s["perfect_median_abs_error_pct"], 1),
             fmt(s["perfect_worst_abs_error_pct"], 1), fmt(s["optimistic_points"], 0),
             fmt(s["growth_explained_median_pct"], 1),
             fmt(s["growth_explained_pooled_pct"], 1)] for s in summaries]
    return pd.DataFrame(rows, columns=list(VARIANT_COLUMNS)), "lllll" + "r" * 8


EFFECT_COLUMNS = ("effect", "switch", "physical cause", "calibrated on", "value",
                  "fit [%]", "validated on", "validation [%]", "no effect [%]",
                  "error metric")
"""The effects table's columns: the errors on the fit data, on the data kept apart, and of
assuming no effect on that data; each in the row's own metric (its last column)."""


def effects_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per effect of scale (``gradsched.experiments.at_scale.effects``): cause,
    calibration, value, and its errors on the fit and the kept-apart data."""
    rows = [[str(r["effect"]), str(r["switch"]), str(r["cause"]), str(r["calibrated_on"]),
             str(r["value"]), fmt(r["fit_error_pct"], 1), str(r["validated_on"]),
             fmt(r["validation_error_pct"], 1), fmt(r["no_effect_validation_error_pct"], 1),
             str(r["metric"])] for _, r in frame.iterrows()]
    return (pd.DataFrame(rows, columns=list(EFFECT_COLUMNS)),
            # a sideways page at 7 pt: about 24 cm of columns and separations
            "p{2cm}p{2.2cm}p{3cm}p{2.6cm}p{2.4cm}rp{2.6cm}rrp{2.8cm}")


DECOMPOSE_COLUMNS = ("model", "P (nodes)", "published [s]", "predicted [s]", "missing [s]",
                     "missing [%]", "exposed comm: replay [s]", "needed [s]",
                     "collective-time factor", "busbw: model [GB/s]", "implied [GB/s]",
                     "overlap slowdown: applied", "needed")
"""The decomposition table (``gradsched.experiments.at_scale.decompose``): one row per
predicted point; the bus bandwidths are of the largest unit's all-gather."""
DECOMPOSE_NEEDED = ("model", "gpus", "nodes", "published_step_s", "predicted_step_s",
                    "missing_s", "missing_pct", "exposed_comm_s", "exposed_comm_needed_s",
                    "comm_factor", "model_busbw_GBps", "implied_busbw_GBps",
                    "slowdown_applied", "slowdown_needed")


def load_decompose_frame(path: str | Path) -> pd.DataFrame:
    """The decomposition CSV of ``gradsched study at-scale --decompose-out``, checked."""
    frame = read_csv_frame(path)
    missing = [c for c in DECOMPOSE_NEEDED if c not in frame.columns]
    if missing:
        raise InputError(f"not a decomposition table: missing {', '.join(missing)}", path=path)
    if frame.empty:
        raise InputError("no rows", path=path)
    return frame


def _inf(value: object, digits: int) -> str:
    return "none" if str(value) == "inf" or value == float("inf") else fmt(value, digits)


def decompose_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per decomposed point (``none``: no value of the quantity reaches the
    published step)."""
    rows = [[str(r["model"]), f"{int(r['gpus'])} ({int(r['nodes'])})",
             fmt(r["published_step_s"], 3), fmt(r["predicted_step_s"], 3),
             fmt(r["missing_s"], 3), fmt(r["missing_pct"], 1), fmt(r["exposed_comm_s"], 3),
             fmt(r["exposed_comm_needed_s"], 3), _inf(r["comm_factor"], 2),
             fmt(r["model_busbw_GBps"], 0), fmt(r["implied_busbw_GBps"], 0),
             fmt(r["slowdown_applied"], 3), _inf(r["slowdown_needed"], 2)]
            for _, r in frame.iterrows()]
    return pd.DataFrame(rows, columns=list(DECOMPOSE_COLUMNS)), "lrrrrrrrrrrrr"


DECOMPOSE_MACROS = (
    "Points", "TopNodes", "FactorMin", "FactorMax", "TopModelBusbwMin", "TopModelBusbwMax",
    "TopImpliedBusbwMin", "TopImpliedBusbwMax", "LowNodes", "LowImpliedBusbwMin",
    "LowImpliedBusbwMax", "SlowdownApplied", "SlowdownMin", "SlowdownMax", "SlowdownNone",
    "SlowdownNoneModels", "ExposedNeededMax", "ExposedMax", "GrowthMin", "GrowthMax",
    "IncreaseSmallest", "SmallestModel", "IncreaseLargest", "StepLargest", "LargestModel",
    "WorstModels", "WorstMissingMin", "WorstMissingMax")
"""The ``AtScaleDecomp<Name>`` macros :func:`decompose_macros` writes (any data)."""
WORST_POINTS = 2
"""How many of the points at the largest node count, those with the largest
collective-time factors, the prose names as fitting the effects worst."""
POINTS_NEEDED = ("group", "model", "gpus", "published_step_s")


def model_label(model: str) -> str:
    """``MPT-1B`` for ``mpt-1b`` (the prose's spelling of the sources' model keys)."""
    return str(model).upper()


def _labels(models: object) -> str:
    """``MPT-1B``, ``MPT-1B and MPT-3B``, ``MPT-1B, MPT-3B and MPT-7B``; ``none``."""
    names = [model_label(m) for m in models]  # type: ignore[attr-defined]
    if len(names) < 2:
        return names[0] if names else "none"
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _growth(frame: pd.DataFrame, points: pd.DataFrame, source: str | Path | None) -> pd.DataFrame:
    """Per decomposed group: its published step at its smallest GPU count (the calibration)
    and at its largest, from the study's per-point CSV."""
    missing = [c for c in POINTS_NEEDED if c not in points.columns]
    if missing:
        raise InputError(f"at-scale points CSV: missing column(s): {', '.join(missing)}",
                         path=source, field=missing[0])
    members = points[points["group"].isin(set(frame["group"]))]
    if set(members["group"]) != set(frame["group"]):
        absent = sorted(set(frame["group"]) - set(members["group"]))
        raise InputError(f"at-scale points CSV lacks the decomposed group {absent[0]!r}",
                         path=source, field="group")
    rows = []
    for name, group in members.groupby("group", sort=False):
        group = group.sort_values("gpus")
        first, last = group.iloc[0], group.iloc[-1]
        rows.append({"group": name, "model": str(first["model"]),
                     "first_step_s": float(first["published_step_s"]),
                     "increase_s": float(last["published_step_s"])
                     - float(first["published_step_s"])})
    out = pd.DataFrame(rows)
    out["growth_pct"] = 100 * out["increase_s"] / out["first_step_s"]
    return out.sort_values("first_step_s")


def decompose_macros(frame: pd.DataFrame, points: pd.DataFrame,
                     source: str | Path | None = None) -> dict[str, str]:
    """``AtScaleDecomp<Name>`` macros (:data:`DECOMPOSE_MACROS`): over the decomposed points
    at the largest node count (and the implied bandwidth at the smallest) and over all of
    them, the range of the collective-time factor, of the implied bus bandwidth against the
    model's, and of the overlap slowdown needed (finite values; the count and the models of
    the points no slowdown reaches), and the largest exposed communication needed; from the
    study's per-point CSV (``points``), the decomposed groups' published step growth from
    their smallest to their largest GPU count (range in %, the increase of the group with the
    shortest and of the one with the longest first step, and that step); and the models and
    missing step of the :data:`WORST_POINTS` points at the largest node count with the
    largest collective-time factors. ``source``: the points' file, named in errors."""
    top = frame[frame["nodes"] == frame["nodes"].max()]
    low = frame[frame["nodes"] == frame["nodes"].min()]
    needed = frame["slowdown_needed"].astype(float)
    finite = frame[needed < float("inf")]
    growth = _growth(frame, points, source)
    shortest, longest = growth.iloc[0], growth.iloc[-1]
    worst = top.assign(factor=top["comm_factor"].astype(float)).nlargest(WORST_POINTS,
                                                                          "factor")
    worst = worst.sort_values("published_step_s")
    macros = {
        "Points": str(len(frame)),
        "TopNodes": str(int(frame["nodes"].max())),
        "FactorMin": fmt(frame["comm_factor"].min(), 2),
        "FactorMax": fmt(frame["comm_factor"].max(), 2),
        "TopModelBusbwMin": fmt(top["model_busbw_GBps"].min(), 0),
        "TopModelBusbwMax": fmt(top["model_busbw_GBps"].max(), 0),
        "TopImpliedBusbwMin": fmt(top["implied_busbw_GBps"].min(), 0),
        "TopImpliedBusbwMax": fmt(top["implied_busbw_GBps"].max(), 0),
        "LowNodes": str(int(frame["nodes"].min())),
        "LowImpliedBusbwMin": fmt(low["implied_busbw_GBps"].min(), 0),
        "LowImpliedBusbwMax": fmt(low["implied_busbw_GBps"].max(), 0),
        "SlowdownApplied": fmt(frame["slowdown_applied"].max(), 3),
        "SlowdownMin": fmt(finite["slowdown_needed"].min(), 2),
        "SlowdownMax": fmt(finite["slowdown_needed"].max(), 2),
        "SlowdownNone": str(len(frame) - len(finite)),
        "SlowdownNoneModels": _labels(frame[needed == float("inf")]["model"].unique()),
        "ExposedNeededMax": fmt(frame["exposed_comm_needed_s"].max(), 2),
        "ExposedMax": fmt(frame["exposed_comm_s"].max(), 2),
        "GrowthMin": fmt(growth["growth_pct"].min(), 1),
        "GrowthMax": fmt(growth["growth_pct"].max(), 1),
        "IncreaseSmallest": fmt(shortest["increase_s"], 2),
        "SmallestModel": model_label(shortest["model"]),
        "IncreaseLargest": fmt(longest["increase_s"], 2),
        "StepLargest": fmt(longest["first_step_s"], 1),
        "LargestModel": model_label(longest["model"]),
        "WorstModels": _labels(worst["model"]),
        "WorstMissingMin": fmt(worst["missing_s"].min(), 2),
        "WorstMissingMax": fmt(worst["missing_s"].max(), 2),
    }
    return {f"AtScaleDecomp{name}": macros[name] for name in DECOMPOSE_MACROS}
