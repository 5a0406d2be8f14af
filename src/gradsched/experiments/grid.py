"""The experiments' grid: plan and replay algorithms on cases (trace, comm model, world
size).

:func:`compare` plans and replays several algorithms on one case; it is the function
behind ``gradsched replay`` and the pipeline's replay rules, one row per algorithm with the
columns of :data:`RESULT_COLUMNS` (and ``grad_accum`` after them when the replay options
accumulate over more than one micro-batch: rows without it are the one-micro-batch rows
written before the option existed). :func:`run_grid` runs it over a list of
:class:`GridCase` (traces x comm models x world sizes), each case's rows labelled; the
studies of :mod:`gradsched.experiments` declare their cases and shape its frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.scoring import SharedReplayCaches, make_plan
from gradsched.plan import Plan
from gradsched.planners import ALGORITHMS_ALL, REPLAY_KNOBS, planner_names, replay_knobs
from gradsched.replay.bounds import lower_bound
from gradsched.replay.engine import ReplayOptions, ReplayResult, replay
from gradsched.replay.timeline import write_timeline
from gradsched.ties import same_time
from gradsched.traces.bundle import ComputeTrace

RESULT_COLUMNS = (
    "algorithm", "world_size", "iteration_s", "compute_s", "exposed_comm_s", "n_collectives",
    "n_buckets", "comm_busy_s", "lower_bound_s", "gap_to_lb_pct", "knobs",
    "comm_below_range_pct", "comm_above_range_pct", "world_size_basis", "compute_bound_by",
    "compute_spread",
)


def gap_to_bound_pct(iteration_s: float, bound_s: float) -> float:
    """How far above the lower bound an iteration is, in percent; 0 when the two are the
    same time (:func:`gradsched.ties.same_time`): a plan at the bound is at it, not 1e-14 %
    above it by the order of a sum's terms."""
    if bound_s <= 0 or same_time(iteration_s, bound_s):
        return 0.0
    return 100.0 * (iteration_s / bound_s - 1.0)


def resolve_world_size(model: CommModel, requested: int | None,
                       source: str | None = None) -> int:
    """The world size to replay: the requested one, which the model must hold (a sweep
    measured at P ranks predicts P only), or the single one the model holds. ``source``
    (the ``--comm`` file) is named in the error."""
    held = model.world_sizes()
    if requested is not None:
        if requested < 1:
            raise ConfigError(f"--world-size must be >= 1, got {requested}")
        if held is not None and requested not in held:
            raise InputError(
                f"the comm model holds world sizes {', '.join(map(str, held))}, not "
                f"--world-size {requested}: measure a sweep with {requested} ranks, or fit a "
                "model that predicts it (gradsched fit --cross-world-size)", path=source,
                field="world_size")
        return requested
    if held is None:
        raise ConfigError("--world-size is required: the cost model predicts any world size")
    if len(held) != 1:
        raise ConfigError("--world-size is required: the comm model holds world sizes "
                          + ", ".join(map(str, held)))
    return held[0]


def expand_algorithms(spec: str | Iterable[str]) -> list[str]:
    """``all`` or a comma-separated list -> planner names (validated)."""
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    if names == ["all"]:
        return list(ALGORITHMS_ALL)
    known = set(planner_names())
    for name in names:
        if name not in known:
            raise ConfigError(f"unknown algorithm {name!r}; known: {', '.join(sorted(known))}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"algorithm {repeated[0]!r} is named twice; each runs once")
    return names


def parse_knob_args(pairs: Iterable[str]) -> dict[str, dict[str, str]]:
    """``--knob ddp.bucket_cap_mb=50`` (or ``bucket_cap_mb=50`` for a single algorithm)
    -> ``{"ddp": {"bucket_cap_mb": "50"}}``; the key ``*`` holds unqualified knobs."""
    known = set(planner_names())
    out: dict[str, dict[str, str]] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--knob {pair!r}: expected name=value")
        key, value = pair.split("=", 1)
        algo, _, knob = key.rpartition(".")
        if not knob:
            raise ConfigError(f"--knob {pair!r}: the knob name is empty")
        if algo and algo not in known:  # a misspelt planner must not be silently ignored
            raise ConfigError(f"--knob {pair!r}: unknown planner {algo!r}; known: "
                              f"{', '.join(sorted(known))}")
        out.setdefault(algo or "*", {})[knob] = value
    return out


def check_knobs_used(knobs: Mapping[str, Mapping[str, str]], algorithms: Iterable[str]) -> None:
    """Refuse knobs addressed to a planner that is not run (``--knob dear.x=1`` with
    ``--algorithms wfbp``): they would be silently ignored."""
    run = set(algorithms)
    unused = sorted(a for a in knobs if a != "*" and a not in run)
    if unused:
        first = unused[0]
        pairs = ", ".join(f"{first}.{k}={v}" for k, v in knobs[first].items())
        raise ConfigError(f"--knob {pairs}: planner {first!r} is not run (algorithms: "
                          f"{', '.join(sorted(run))}); add it to the algorithms or drop "
                          "the knob")


def knobs_for(algorithm: str, knobs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Knobs that apply to ``algorithm``."""
    return {**knobs.get("*", {}), **knobs.get(algorithm, {})}


def scoring_knobs(algorithm: str, replay_settings: Mapping[str, Any],
                  own: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs of ``algorithm``: those of ``replay_settings`` (interference, issue order;
    :data:`~gradsched.planners.REPLAY_KNOBS`) that it takes, so that a planner that scores
    candidates by replay scores with the replay its plan is judged by, then ``own`` (which
    win)."""
    return replay_knobs(algorithm, replay_settings) | dict(own)


def plan_case(algorithm: str, trace: ComputeTrace, model: CommModel, world_size: int,
              knobs: Mapping[str, Any] | None = None, grad_accum: int = 1,
              caches: SharedReplayCaches | None = None) -> Plan:
    """The algorithm's plan of one case (scored planners scored by the replay of a step of
    ``grad_accum`` micro-batches, with the replays of ``caches`` where given), checked to
    cover every tensor of the trace."""
    plan = make_plan(algorithm, trace, model, world_size, dict(knobs or {}), grad_accum,
                     caches)
    plan.check_covers(trace.names)
    return plan


def run_algorithm(
    algorithm: str,
    trace: ComputeTrace,
    model: CommModel,
    world_size: int,
    knobs: Mapping[str, Any] | None = None,
    options: ReplayOptions | None = None,
    timeline: bool = False,
    caches: SharedReplayCaches | None = None,
) -> tuple[Plan, ReplayResult]:
    """Make the algorithm's plan (:func:`plan_case`) and replay it; with ``caches`` (made
    for ``options``' ``grad_accum``), a plan already replayed with ``options`` by a search
    or an earlier call is not replayed again (without a timeline)."""
    grad_accum = options.grad_accum if options is not None else 1
    plan = plan_case(algorithm, trace, model, world_size, knobs, grad_accum, caches)
    if caches is not None and not timeline:
        cache = caches.for_options(trace, model, world_size, options or ReplayOptions())
        return plan, cache.result(plan)
    return plan, replay(trace, plan, model, world_size, options, timeline=timeline)


@dataclass(frozen=True)
class CaseOutputs:
    """What :func:`compare` writes beside its rows, per algorithm: the replay's timeline
    (:func:`gradsched.replay.timeline.write_timeline`) in ``timeline_dir`` and the plan
    (``<algorithm>.plan.json``) in ``plans_dir``; None: not written."""

    timeline_dir: str | Path | None = None
    plans_dir: str | Path | None = None


def compare(
    trace: ComputeTrace,
    model: CommModel,
    world_size: int,
    algorithms: Iterable[str],
    knobs: Mapping[str, Mapping[str, str]] | None = None,
    options: ReplayOptions | None = None,
    outputs: CaseOutputs = CaseOutputs(),
    plans: dict[str, Plan] | None = None,
) -> pd.DataFrame:
    """One result row per algorithm (see :data:`RESULT_COLUMNS`). A planner that takes the
    replay's interference and issue order as knobs (``best``) scores its candidates with
    those of ``options`` (unless its knobs say otherwise). ``plans``, when given, is filled
    with each algorithm's plan (for the domain notes of ``gradsched replay``)."""
    knobs = knobs or {}
    timeline_dir, plans_dir = outputs.timeline_dir, outputs.plans_dir
    grad_accum = options.grad_accum if options is not None else 1
    bound = lower_bound(trace, model, world_size, grad_accum).lower_bound_s
    # One cache of replays for the whole case: `best` runs every other planner again and
    # scores their plans with the replay the rows use; a plan replayed once (by a search
    # or for a row) is not replayed again with the same options.
    caches = SharedReplayCaches(grad_accum)
    rows = []
    for algorithm in algorithms:
        own = knobs_for(algorithm, knobs)
        if options is not None:
            own = scoring_knobs(algorithm, {k: getattr(options, k) for k in REPLAY_KNOBS}, own)
        plan, result = run_algorithm(algorithm, trace, model, world_size, own, options,
                                     timeline=timeline_dir is not None, caches=caches)
        if timeline_dir is not None:
            write_timeline(result, timeline_dir)
        if plans_dir is not None:
            plan.save(Path(plans_dir) / f"{algorithm}.plan.json")
        if plans is not None:
            plans[algorithm] = plan
        rows.append({
            "algorithm": algorithm,
            "world_size": world_size,
            "iteration_s": result.iteration_s,
            "compute_s": result.compute_s,
            "exposed_comm_s": result.exposed_comm_s,
            "n_collectives": result.n_collectives,
            "n_buckets": result.n_buckets,
            "comm_busy_s": result.comm_busy_s,
            "lower_bound_s": bound,
            "gap_to_lb_pct": gap_to_bound_pct(result.iteration_s, bound),
            "knobs": json.dumps(plan.knobs, sort_keys=True, default=str),
            "comm_below_range_pct": result.comm_below_range_pct,
            "comm_above_range_pct": result.comm_above_range_pct,
            "world_size_basis": result.world_size_basis,
            "compute_bound_by": {True: "host", False: "device"}.get(trace.host_bound,
                                                                    "unknown"),
            "compute_spread": trace.compute_spread,
        })
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    if grad_accum != 1:
        frame["grad_accum"] = grad_accum
    return frame


@dataclass(frozen=True)
class GridCase:
    """One case of a grid: the algorithms to plan and replay on ``trace`` with ``model`` at
    ``world_size`` ranks, and the labels (column -> value) its rows carry."""

    trace: ComputeTrace
    model: CommModel
    world_size: int
    algorithms: tuple[str, ...]
    labels: Mapping[str, Any] = field(default_factory=dict)


def run_grid(cases: Iterable[GridCase], options: ReplayOptions | None = None,
             knobs: Mapping[str, Mapping[str, str]] | None = None) -> pd.DataFrame:
    """:func:`compare` on every case, in order: one row per (case, algorithm), the case's
    label columns first, then :data:`RESULT_COLUMNS`."""
    frames = []
    for case in cases:
        clash = sorted(set(case.labels) & set(RESULT_COLUMNS))
        if clash:
            raise ConfigError(f"grid case labels {clash} are result columns")
        frame = compare(case.trace, case.model, case.world_size, case.algorithms, knobs,
                        options)
        labels = pd.DataFrame({k: [v] * len(frame) for k, v in case.labels.items()},
                              index=frame.index)
        frames.append(pd.concat([labels, frame], axis=1))
    if not frames:
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    return pd.concat(frames, ignore_index=True)
