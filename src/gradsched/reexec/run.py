"""Running the re-execution: each case's plans, deduplicated into the items the ranks run,
then one launch per case that times every item in seeded interleaved rounds (steps 1 and 2
of the method in :mod:`gradsched.reexec`; the timing protocol is
:mod:`gradsched.runtime.rounds`).

torch is imported only where the ranks (or the provenance) need it: the package's
planning side stays importable without it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.costmodel.base import load_comm_spec
from gradsched.experiments.grid import plan_case, scoring_knobs
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.planners.ddp_caps import ddp_caps
from gradsched.provenance import machine_versions
from gradsched.reexec.config import (
    ZERO1_MODES,
    Case,
    InterferenceSpec,
    Settings,
    interference_for,
    load_interference,
)
from gradsched.traces.bundle import ComputeTrace

CONTROL = "compute-only"
"""The item (and row) of the compute-only control."""

FOREIGN_LIMIT_CORES = 0.25
"""CPU cores used by something other than the measured ranks, at or above which an item's
measurement is flagged (and a case is not started unless ``allow_load``)."""

ITERATION_COLUMNS = ("case", "model", "batch_size", "world_size", "network", "item", "kind",
                     "round", "position", "iteration", "iteration_s", "load_avg_1m",
                     "foreign_cpu_cores", "started_at")


def executor_key(plan_dict: Mapping[str, Any]) -> str:
    """A digest of what the executor does with a plan (buckets, tensors, collectives,
    chunks, priorities, update). Plans with equal keys run identically."""
    essence = {"update": plan_dict.get("update", "global"),
               "buckets": [[list(b["tensors"]), b.get("collective", "all_reduce"),
                            int(b.get("chunks", 1)), b.get("priority")]
                           for b in plan_dict["buckets"]]}
    text = json.dumps(essence, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class CasePlans:
    """The plans of one case and the items to measure."""

    plans: dict[str, Any]  # label -> Plan (algorithms and ddp-native-<cap>)
    item_of: dict[str, str]  # label -> item key
    items: list[dict[str, Any]]  # what the ranks run


def ddp_list_label(planner: str) -> str:
    """``contiguous_optimum`` -> ``ddp-list-contiguous_optimum``: stock DDP running that
    planner's plan through ``bucket_cap_mb_list``."""
    return f"ddp-list-{planner}"


def ddp_list_item(planner: str, plan: Any, trace: ComputeTrace) -> dict[str, Any]:
    """The item that runs ``plan`` on stock PyTorch DDP: the per-bucket caps of
    :func:`gradsched.planners.ddp_caps.ddp_caps` (exact MiB, which rebuild the plan's
    buckets) and the plan's buckets, which the ranks compare with DDP's rebuilt ones."""
    caps = ddp_caps(plan, trace)
    return {"key": ddp_list_label(planner), "kind": "ddp-list", "plan": None,
            "bucket_cap_mb": None, "bucket_cap_mb_list": list(caps.exact_mb),
            "expected_buckets": [list(b.tensors) for b in plan.buckets]}


def ddp_label(cap: float | None) -> str:
    """``25.0`` -> ``ddp-native-25``; None (no ``bucket_cap_mb``) -> ``ddp-native-default``."""
    return "ddp-native-default" if cap is None else f"ddp-native-{cap:g}"


def make_case_plans(case: Case, settings: Settings,
                    interference: Mapping[str, float] | None = None) -> CasePlans:
    """Every algorithm's plan (from the committed traces), deduplicated into items.
    ``interference`` (``compute_slowdown``, ``comm_slowdown``, ``collective_cpu_s``) is
    given to the ``best`` planner's scoring replay, which also assumes the executor's
    fixed issue order (knobs set in the config win). Each plan is made (and checked) as
    every case of the experiments' grid is, :func:`gradsched.experiments.grid.plan_case`,
    for a step of the case's ``grad_accum`` micro-batches. The case's ZeRO-1 modes add one
    ``zero1`` item each, whose plan (and prediction) is ``zero1_torch``'s."""
    trace = ComputeTrace.load(case.compute)
    k = case.grad_accum
    model = load_comm_spec(case.comm)
    plans: dict[str, Any] = {}
    item_of: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for algorithm in settings.algorithms:
        # planners that score by replay score what the executor will run
        knobs = scoring_knobs(algorithm, {"issue": "executor", **(interference or {})},
                              settings.knobs.get(algorithm, {}))
        plan = plan_case(algorithm, trace, model, case.world_size, knobs, k)
        plans[algorithm] = plan
        data = plan.to_dict()
        key = executor_key(data)
        if key not in seen:
            seen[key] = f"plan-{algorithm}"
            items.append({"key": f"plan-{algorithm}", "kind": "plan", "plan": data,
                          "bucket_cap_mb": None})
        item_of[algorithm] = seen[key]
    for planner in settings.ddp_bucket_cap_mb_list_from:
        plan = plans.get(planner)
        if plan is None:  # not measured through the executor: planned as the others are
            knobs = scoring_knobs(planner, {"issue": "executor", **(interference or {})},
                                  settings.knobs.get(planner, {}))
            plan = plan_case(planner, trace, model, case.world_size, knobs, k)
        label = ddp_list_label(planner)
        plans[label] = plan  # its prediction: the replay of the plan (the same buckets)
        items.append(ddp_list_item(planner, plan, trace))
        item_of[label] = label
    for cap in settings.ddp_bucket_cap_mb:
        label = ddp_label(cap)
        plans[label] = plan_case("ddp", trace, model, case.world_size, {"bucket_cap_mb": cap},
                                 k)
        items.append({"key": label, "kind": "ddp", "plan": None, "bucket_cap_mb": cap})
        item_of[label] = label
    for mode in case.zero1:
        label = ZERO1_MODES[mode]
        plans[label] = plan_case("zero1_torch", trace, model, case.world_size,
                                 {"overlap_with_ddp": mode == "overlap"}, k)
        items.append({"key": label, "kind": "zero1", "plan": plans[label].to_dict(),
                      "bucket_cap_mb": None})
        item_of[label] = label
    items.append({"key": CONTROL, "kind": "control", "plan": None, "bucket_cap_mb": None})
    return CasePlans(plans=plans, item_of=item_of, items=items)


def case_plans_for(case: Case, settings: Settings,
                   interference: InterferenceSpec = None) -> CasePlans:
    """The case's plans (:func:`make_case_plans`), the ``best`` planner scoring with the
    case's calibrated interference when ``interference`` names a file for its network.
    ``gradsched reexec run`` checks them against the case's model before any case starts
    (the pre-launch gate, :func:`gradsched.runtime.prelaunch.check_plans`)."""
    inter_path = interference_for(interference, case.network, case.world_size)
    params, _ = load_interference(inter_path)
    return make_case_plans(case, settings, params if inter_path else None)


def executor_buffer_bytes(case: Case, case_plans: CasePlans, numel: Mapping[str, int]) -> int:
    """The largest executor buffers (:meth:`gradsched.plan.Plan.buffer_bytes`) one rank
    of ``case`` holds for the items run through gradsched's executor (kind ``plan``);
    ``numel``: the model's parameter sizes (name -> elements)."""
    executor = {item["key"] for item in case_plans.items if item["kind"] == "plan"}
    return max((plan.buffer_bytes(case.world_size, numel=numel)
                for label, plan in case_plans.plans.items()
                if case_plans.item_of[label] in executor), default=0)


# --------------------------------------------------------------------------- measuring
def measure_case(case: Case, settings: Settings, case_plans: CasePlans
                 ) -> tuple[pd.DataFrame, dict[str, Any], float | None]:
    """Launch the ranks for ``case`` (:func:`gradsched.runtime.rounds.launch_rounds`,
    refused while other work keeps :data:`FOREIGN_LIMIT_CORES` busy unless
    ``allow_load``); return one row per timed iteration, the buckets stock DDP rebuilt for
    each ``ddp-list`` item (:func:`rebuilt_record`) and the busy cores before the start."""
    from gradsched.runtime.rounds import (  # the runtime imports torch
        Item,
        Launch,
        Timing,
        foreign_cores_of,
        launch_rounds,
        slowest,
    )

    items = [Item(key=it["key"], kind=it["kind"], plan=it["plan"],
                  bucket_cap_mb=it["bucket_cap_mb"],
                  bucket_cap_mb_list=it.get("bucket_cap_mb_list"),
                  expected_buckets=it.get("expected_buckets")) for it in case_plans.items]
    timing = Timing(model=case.model, batch_size=case.batch_size, rounds=settings.rounds,
                    warmup=settings.warmup, iters=settings.iters, seed=settings.seed,
                    seq_len=case.seq_len, timeout_s=settings.timeout_s,
                    grad_accum=case.grad_accum)
    n_runs = settings.rounds * len(items)
    launched = launch_rounds(items, timing, Launch(
        world_size=case.world_size, backend=settings.backend,
        threads=settings.threads, cluster=case.rate,
        deadline_s=max(3600.0, settings.timeout_s * n_runs),
        busy_limit_cores=None if settings.allow_load else FOREIGN_LIMIT_CORES,
        what=f"reexec: case {case.name}"))
    results = launched.results
    rows = []
    for k, run in enumerate(results[0]["runs"]):
        foreign = foreign_cores_of(results, k)
        item = case_plans.items[run["item"]]
        for i, t in enumerate(slowest(results, k, case.world_size)):
            rows.append({"case": case.name, "model": case.model, "batch_size": case.batch_size,
                         "world_size": case.world_size, "network": case.network,
                         "item": item["key"], "kind": item["kind"], "round": run["round"],
                         "position": run["position"], "iteration": i, "iteration_s": t,
                         "load_avg_1m": run["load"], "foreign_cpu_cores": foreign,
                         "started_at": run["started_at"]})
    return (pd.DataFrame(rows, columns=list(ITERATION_COLUMNS)),
            rebuilt_record(case_plans.items, results), launched.busy_cores_before)


def rebuilt_record(items: Sequence[Mapping[str, Any]],
                   results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per ``ddp-list`` item: the buckets DDP rebuilt (rank 0, first round: tensor names per
    bucket), their number, whether every rank in every round rebuilt the same ones, and
    whether they are the plan's (``buckets_match_plan``; else the item did not run the
    plan's schedule and its row must not be read as the plan's)."""
    from gradsched.runtime.runners import buckets_match  # the runtime imports torch

    out: dict[str, Any] = {}
    for index, item in enumerate(items):
        if item["kind"] != "ddp-list":
            continue
        seen = [run["rebuilt_buckets"] for result in results for run in result["runs"]
                if run["item"] == index]
        first = seen[0]
        out[item["key"]] = {
            "n_buckets": len(first), "n_plan_buckets": len(item["expected_buckets"]),
            "same_every_rank_and_round": all(buckets_match(s, first) for s in seen),
            "buckets_match_plan": all(buckets_match(s, item["expected_buckets"])
                                      for s in seen),
            "buckets": first}
    return out


def run_case(case: Case, settings: Settings, out_dir: str | Path,
             interference: InterferenceSpec = None,
             case_plans: CasePlans | None = None) -> Path:
    """Plan, measure and save one case under ``out_dir/<case>/`` (iterations.csv, plans/,
    meta.json). ``interference``: the calibrated interference JSON(s) that the ``best``
    planner scores with (see :func:`make_case_plans`); ``case_plans``: the case's plans
    when the caller made (and checked) them already (default: :func:`case_plans_for`).
    Returns the case folder."""
    folder = Path(out_dir) / case.name
    inter_path = interference_for(interference, case.network, case.world_size)
    params, _ = load_interference(inter_path)
    if case_plans is None:
        case_plans = case_plans_for(case, settings, interference)
    for label, plan in case_plans.plans.items():
        plan.save(folder / "plans" / f"{label}.plan.json")
    load_before = os.getloadavg()
    start = time.monotonic()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    frame, rebuilt, busy_before = measure_case(case, settings, case_plans)
    wall = time.monotonic() - start
    write_csv_atomic(folder / "iterations.csv", frame)
    meta = {"case": asdict(case), "settings": settings.to_dict(), "started_at": started,
            "wall_s": round(wall, 1), "load_average_before": list(load_before),
            "busy_cores_before": busy_before,
            "load_average_after": list(os.getloadavg()), "machine": machine_versions(),
            "item_of": case_plans.item_of,
            "planning_interference": ({"file": str(inter_path)} | params
                                      if inter_path else None),
            "items": [{k: v for k, v in it.items() if k not in ("plan", "expected_buckets")}
                      for it in case_plans.items],
            "ddp_rebuilt_buckets": rebuilt,
            "method": "gradsched reexec run: one launch per case; rounds x items (a seeded "
                      "random order per round); each item builds the model (seed fixed), "
                      "runs warmup untimed + iters timed iterations; iteration = period "
                      "between starts of consecutive iterations, max over ranks "
                      "(gradsched.runtime.rounds)"}
    write_json_atomic(folder / "meta.json", meta)
    return folder
