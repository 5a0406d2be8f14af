"""The at-scale study: for each group of published points, calibrate the FLOPs model's
utilisation on the smallest GPU count (:func:`~gradsched.experiments.at_scale.predict.
calibrate_mfu`, nothing else is fitted, on no other point), predict every point with the
FSDP2 replay and the settings' comm model, and score it against the published step and the
perfect-scaling baseline (:mod:`gradsched.experiments.at_scale.growth`).

:func:`run` returns one row per point (:data:`POINT_COLUMNS`); :func:`groups_frame` one row
per group; :func:`summary` the aggregates over the predicted points (every point but the
calibration one of each group).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.stragglers import MEASURED
from gradsched.experiments.at_scale.growth import explained, growth, median, pooled
from gradsched.experiments.at_scale.points import Point, grouped
from gradsched.experiments.at_scale.predict import (
    StepReplay,
    base_trace,
    calibrate_mfu,
    comm_model,
    predicted_step_s,
)
from gradsched.experiments.at_scale.settings import AtScaleSettings
from gradsched.experiments.at_scale.unit_jitter import UnitJitter

POINT_COLUMNS = (
    "variant", "comm_model", "comm_proxy", "overlap_slowdown", "stragglers", "source", "group",
    "model", "gpu", "gpus", "grad_accum", "calibration", "mfu", "published_step_s",
    "predicted_step_s", "error_pct", "perfect_step_s", "perfect_error_pct",
    "published_growth_pct", "predicted_growth_pct", "growth_explained_pct", "exposed_comm_s",
    "comm_world_size_basis", "comm_outside_sizes_pct", "sync_points", "unit_slack_min_pct",
    "unit_bind_cv", "unit_bind_step_cv", "unit_stragglers", "unit_sync_wait_s")


def _r(value: float, digits: int) -> float:
    return round(float(value), digits) + 0.0 if math.isfinite(value) else math.nan


def group_rows(points: Sequence[Point], model: CommModel,
               settings: AtScaleSettings) -> list[dict[str, object]]:
    """The rows of one group (points sorted by GPU count; the first is calibrated on)."""
    first = points[0]
    mfu = calibrate_mfu(first, model, settings)
    per_token0 = first.published_step_s / first.tokens_per_gpu_step
    choice = settings.choice(first.gpu)
    rows = []
    for p in points:
        step = predicted_step_s(base_trace(p), mfu, p, model, settings)
        predicted = step.replay.iteration_s
        perfect = p.tokens_per_gpu_step * per_token0
        g_pub, g_pred = growth(p.published_step_s, perfect), growth(predicted, perfect)
        calibration = p is first
        share = math.nan if calibration else explained(g_pub, g_pred, settings.growth_floor)
        rows.append({
            **settings.effects(), "comm_model": choice.label,
            "comm_proxy": "yes" if choice.proxy else "no", "source": p.source,
            "group": p.group, "model": p.shape.name, "gpu": p.gpu, "gpus": p.gpus,
            "grad_accum": p.grad_accum, "calibration": calibration, "mfu": _r(mfu, 6),
            "published_step_s": _r(p.published_step_s, 6), "predicted_step_s": _r(predicted, 6),
            "error_pct": _r(100 * (predicted / p.published_step_s - 1), 3),
            "perfect_step_s": _r(perfect, 6),
            "perfect_error_pct": _r(100 * (perfect / p.published_step_s - 1), 3),
            "published_growth_pct": _r(100 * g_pub, 3),
            "predicted_growth_pct": _r(100 * g_pred, 3),
            "growth_explained_pct": _r(100 * share, 1),
            "exposed_comm_s": _r(step.replay.exposed_comm_s, 6),
            "comm_world_size_basis": step.basis,
            "comm_outside_sizes_pct": _r(step.shares.outside_pct, 1),
            **_sync_columns(step, settings, p.grad_accum)})
    return rows


def _sync_columns(step: StepReplay, settings: AtScaleSettings,
                  grad_accum: int) -> dict[str, object]:
    """The step's synchronisation points, its smallest unit slack, the per-unit jitter at
    which a unit synchronisation would bind, and (with ``unit_jitter``) the wait added for
    it (:mod:`~.sync`); empty at one GPU."""
    if step.sync is None:
        return {"sync_points": step.replay.n_collectives, "unit_slack_min_pct": math.nan,
                "unit_bind_cv": math.nan, "unit_bind_step_cv": math.nan,
                "unit_sync_wait_s": 0.0 if settings.unit_jitter is not None else math.nan}
    wait = (math.nan if settings.unit_jitter is None
            else grad_accum * step.sync.wait_s(settings.unit_jitter.cv))
    return {"sync_points": step.sync.sync_points,
            "unit_slack_min_pct": _r(100 * step.sync.slack_share, 1),
            "unit_bind_cv": _r(step.sync.bind_cv, 4),
            "unit_bind_step_cv": _r(step.sync.bind_step_cv, 4),
            "unit_sync_wait_s": _r(wait, 6)}


def run(points: Sequence[Point], settings: AtScaleSettings) -> pd.DataFrame:
    """Every group of ``points`` under ``settings`` (module docstring)."""
    models: dict[str, CommModel] = {}
    rows: list[dict[str, object]] = []
    for members in grouped(points).values():
        gpu = members[0].gpu
        if gpu not in models:
            models[gpu] = comm_model(settings.choice(gpu).spec)
        rows += group_rows(members, models[gpu], settings)
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


def _predicted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame["calibration"].astype(bool)]


def summary(frame: pd.DataFrame, floor: float,
            unit_jitter: UnitJitter | None = None) -> dict[str, float | int | str]:
    """Aggregates over the predicted points of ``frame`` (one variant): the sources and the
    GPU counts predicted, |error| median and
    worst, the same for perfect scaling, how many are optimistic (predicted faster than
    published), the share of the published growth explained (median and pooled), the
    median growth from each group's smallest to its largest count (published, predicted),
    the largest exposed communication, and the domain: how many points are priced at a
    world size the comm model did not measure, or with communication outside its sizes."""
    pred = _predicted(frame)
    pairs = list(zip(pred["published_growth_pct"] / 100, pred["predicted_growth_pct"] / 100,
                     strict=True))
    shares = pred["growth_explained_pct"]
    largest = pred.sort_values("gpus").groupby("group", sort=False).tail(1)
    first = frame.iloc[0] if len(frame) else {}
    return {
        "variant": str(first.get("variant", "")),
        "comm_models": "; ".join(
            f"{label} ({', '.join(str(g).upper() for g in sorted(gpus))})"
            for label, gpus in frame.groupby("comm_model")["gpu"].unique().items()),
        "overlap_slowdown": str(first.get("overlap_slowdown", "")),
        "stragglers": str(first.get("stragglers", "")),
        "unit_stragglers": str(first.get("unit_stragglers", "")),
        "growth_floor_pct": _r(100 * floor, 3),
        "groups": int(frame["group"].nunique()), "predicted_points": len(pred),
        "sources": "; ".join(sorted(frame["source"].astype(str).unique())),
        "predicted_gpus_min": int(pred["gpus"].min()) if len(pred) else 0,
        "predicted_gpus_max": int(pred["gpus"].max()) if len(pred) else 0,
        "median_abs_error_pct": _r(median(pred["error_pct"].abs()), 2),
        "worst_abs_error_pct": _r(pred["error_pct"].abs().max(), 2),
        "perfect_median_abs_error_pct": _r(median(pred["perfect_error_pct"].abs()), 2),
        "perfect_worst_abs_error_pct": _r(pred["perfect_error_pct"].abs().max(), 2),
        "optimistic_points": int((pred["error_pct"] < 0).sum()),
        "growth_points": int(shares.notna().sum()),
        "growth_explained_median_pct": _r(median(shares), 1),
        "growth_explained_pooled_pct": _r(100 * pooled(pairs, floor), 1),
        "largest_published_growth_median_pct": _r(median(largest["published_growth_pct"]), 2),
        "largest_predicted_growth_median_pct": _r(median(largest["predicted_growth_pct"]), 2),
        "max_exposed_comm_s": _r(frame["exposed_comm_s"].max(), 3),
        "published_step_min_s": _r(frame["published_step_s"].min(), 3),
        "published_step_max_s": _r(frame["published_step_s"].max(), 3),
        "extrapolated_world_size_points": int((pred["comm_world_size_basis"] != "measured").sum()),
        "outside_sizes_points": int((pred["comm_outside_sizes_pct"] > 0).sum()),
        **sync_summary(pred, unit_jitter),
    }


def sync_summary(pred: pd.DataFrame,
                 unit_jitter: UnitJitter | None = None) -> dict[str, float | int]:
    """Over the predicted points (:mod:`~.sync`): the synchronisations per step, the median
    and smallest unit slack, the smallest per-unit jitter that would make a unit
    synchronisation bind, and the number of points where it could bind: if all of the
    measured per-step variation of a GPU-bound rank (:data:`gradsched.costmodel.stragglers.
    MEASURED`, the cv ``--stragglers auto`` applies to these traces) were independent
    per-unit jitter; with ``unit_jitter``, at its measured fit and validation jitter, and
    the largest wait it adds (share of the published step)."""
    step_cv = MEASURED["gpu-bound"].cv
    out: dict[str, float | int] = {
        "sync_points_median": _r(median(pred["sync_points"]), 1),
        "sync_points_max": int(pred["sync_points"].max()) if len(pred) else 0,
        "unit_slack_min_pct_median": _r(median(pred["unit_slack_min_pct"]), 1),
        "unit_slack_min_pct_min": _r(pred["unit_slack_min_pct"].min(), 1),
        "unit_bind_cv_min": _r(pred["unit_bind_cv"].min(), 4),
        "unit_bind_step_cv_min": _r(pred["unit_bind_step_cv"].min(), 4),
        "straggler_step_cv": _r(step_cv, 4),
        "unit_sync_binding_points": int((pred["unit_bind_step_cv"] < step_cv).sum()),
    }
    if unit_jitter is not None:
        waits = pred["unit_sync_wait_s"] / pred["published_step_s"]
        out |= {"unit_jitter_cv": _r(unit_jitter.cv, 4),
                "unit_jitter_validation_cv": _r(unit_jitter.validation_cv, 4),
                "unit_jitter_validation_error_pct": _r(unit_jitter.validation_error_pct, 1),
                "unit_jitter_step_kernel_cv": _r(unit_jitter.step_kernel_cv, 4),
                "unit_jitter_binding_points": int((pred["unit_bind_cv"] < unit_jitter.cv).sum()),
                "unit_jitter_validation_binding_points": int(
                    (pred["unit_bind_cv"] < unit_jitter.validation_cv).sum()),
                "unit_sync_wait_max_pct": _r(100 * waits.max(), 2),
                "unit_sync_wait_points": int((pred["unit_sync_wait_s"] > 0).sum())}
    return out


GROUP_COLUMNS = ("group", "model", "gpu", "gpus", "mfu", "median_abs_error_pct",
                 "perfect_median_abs_error_pct", "published_growth_pct",
                 "predicted_growth_pct", "growth_explained_pct")


def groups_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per group: GPU counts, calibrated utilisation, median |error| of the
    prediction and of perfect scaling, and the growths from the smallest to the largest
    count with the share explained."""
    rows = []
    for name, members in frame.groupby("group", sort=False):
        pred = _predicted(members)
        last = members.sort_values("gpus").iloc[-1]
        rows.append({"group": name, "model": last["model"], "gpu": last["gpu"],
                     "gpus": "-".join(str(g) for g in sorted(members["gpus"])),
                     "mfu": last["mfu"],
                     "median_abs_error_pct": _r(median(pred["error_pct"].abs()), 2),
                     "perfect_median_abs_error_pct": _r(median(pred["perfect_error_pct"].abs()), 2),
                     "published_growth_pct": last["published_growth_pct"],
                     "predicted_growth_pct": last["predicted_growth_pct"],
                     "growth_explained_pct": last["growth_explained_pct"]})
    return pd.DataFrame(rows, columns=list(GROUP_COLUMNS))
