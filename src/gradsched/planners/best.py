"""``best``: run every planner (with its own knob search) and keep the fastest by replay.

Not an algorithm from the literature: the oracle over all implemented planners. The
candidates are every registered planner at its defaults (DeAR with its Bayesian
optimisation, ``search`` with its family search), plus Horovod's pre-0.21 defaults,
P3 and ByteScheduler's partition search. Each is scored by the replay engine; the fastest
wins. Candidates whose times tie within :data:`gradsched.ties.RTOL` go to the one that
launches the fewest collectives per iteration (each costs the host a launch and the
network a start-up that a bare cost model need not show: on gloo the re-execution measured
milliseconds per collective), then to the earliest in that order (the rivals, then
:data:`EXTRA`); never to floating-point noise. The rivals are every planner of "all" but
``best``, by name, as the registry (:data:`gradsched.planners.RIVALS`) passes them: a new
planner registered there is a rival without any change here.
``Plan.info["candidates"]`` lists every candidate's iteration time and
``Plan.info["winner"]`` the winning one. The scores come from the ``scorer`` the caller
supplies (:func:`gradsched.experiments.make_plan`: the replay engine).

The scoring replay can include the machine's calibrated interference (knobs
``collective_cpu_s``, ``compute_slowdown``, ``comm_slowdown``, as measured by
``gradsched reexec interference``): on a machine where each collective costs the compute
thread milliseconds (gloo on a few CPU cores), a plan of a thousand small collectives
that wins on the bare cost model loses in reality, and this is how ``best`` knows it.
With ``issue=executor`` it scores what gradsched's executor will run (one fixed issue
sequence; see :mod:`gradsched.replay.engine`) rather than the algorithms' dynamic
priority scheduling, which a process group cannot do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.planners._family import Knob, ScorerFactory, base_info, check_choice, need_scorer
from gradsched.planners.search import DDP_CAPS_MB
from gradsched.ties import fastest_label_by
from gradsched.traces.bundle import ComputeTrace

NAME = "best"
SUMMARY = "every planner with its knob search; the fastest plan by replay"
SCORED = True  # searches by scoring candidate plans (takes a ``scorer``)
KNOBS: tuple[Knob, ...] = (
    Knob("replay_iterations", int, 5, "iterations of each scoring replay"),
    Knob("collective_cpu_s", float, 0.0,
         "interference: compute time each collective costs backward, seconds"),
    Knob("compute_slowdown", float, 1.0,
         "interference: backward speed divisor during a collective's bandwidth phase"),
    Knob("comm_slowdown", float, 1.0,
         "interference: collective speed divisor while backward computes"),
    Knob("issue", str, "dynamic",
         "issue order the scoring replay assumes: dynamic (the algorithms as designed) or "
         "executor (the fixed sequence gradsched's executor issues)",
         choices=("dynamic", "executor")),
)



class Rival(NamedTuple):
    """A planner ``best`` runs: its ``plan`` function and whether it scores candidates
    (takes a ``scorer``)."""

    plan: Callable[..., Plan]
    scored: bool = False

# Extra settings beyond each planner's defaults; DDP at every cap ``search`` sweeps, so that
# ``best`` scored with the executor's issue order and the calibrated interference is never
# slower than tuned DDP (``search`` picks its DDP cap under the bare model, without interference).
EXTRA: tuple[tuple[str, dict[str, Any]], ...] = (
    ("horovod", {"defaults": "pre021"}),
    ("bytescheduler", {"p3": True, "search": "none"}),
    ("bytescheduler", {"search": "partition"}),
    *(("ddp", {"bucket_cap_mb": cap}) for cap in DDP_CAPS_MB),
)


def candidates(trace: ComputeTrace, model: CommModel, world_size: int,
               scorer: ScorerFactory | None, rivals: Mapping[str, Rival],
               ) -> Iterator[tuple[str, Plan]]:
    """Every rival at its defaults, in ``rivals``' order, then the extra settings of those
    present (the rivals that score their own candidates get ``scorer``)."""

    def run(name: str, **knobs: Any) -> Plan:
        rival = rivals[name]
        own = {"scorer": scorer} if rival.scored else {}
        return rival.plan(trace, model, world_size, **knobs, **own)

    for name in rivals:
        yield name, run(name)
    for name, knobs in EXTRA:
        if name in rivals:
            label = name + "(" + ",".join(f"{k}={v}" for k, v in knobs.items()) + ")"
            yield label, run(name, **knobs)


@dataclass(frozen=True)
class Knobs:
    """``best``'s knobs: the scoring replay's settings (:data:`KNOBS` documents each),
    checked once when built."""

    replay_iterations: int = 5
    collective_cpu_s: float = 0.0
    compute_slowdown: float = 1.0
    comm_slowdown: float = 1.0
    issue: str = "dynamic"

    def __post_init__(self) -> None:
        check_choice("issue", self.issue, ("dynamic", "executor"))


def plan(trace: ComputeTrace, model: CommModel, world_size: int, knobs: Knobs | None = None,
         scorer: ScorerFactory | None = None,
         rivals: Mapping[str, Rival] | None = None) -> Plan:
    """The fastest candidate by ``scorer`` (the replay), relabelled ``best``; ``rivals``:
    the planners to run (the registry passes :data:`gradsched.planners.RIVALS`)."""
    if not rivals:
        raise ConfigError("planner 'best' needs the planners to compare: run it through "
                          "gradsched.planners.make_plan (the registry passes them)")
    k = knobs or Knobs()
    replay_iterations, issue = k.replay_iterations, k.issue
    collective_cpu_s, compute_slowdown, comm_slowdown = (k.collective_cpu_s,
                                                         k.compute_slowdown, k.comm_slowdown)
    interference = {"collective_cpu_s": collective_cpu_s,
                    "compute_slowdown": compute_slowdown, "comm_slowdown": comm_slowdown}
    score = need_scorer(NAME, scorer)(trace, model, world_size, replay_iterations,
                                      **interference, issue=issue)
    plans = dict(candidates(trace, model, world_size, scorer, rivals))
    scores = {label: score(cand) for label, cand in plans.items()}
    label = fastest_label_by(scores, {k: p.n_collectives for k, p in plans.items()})
    chosen = plans[label]
    info = base_info(trace, world_size) | {
        "winner": label, "winner_algorithm": chosen.algorithm,
        "winner_knobs": dict(chosen.knobs), "iteration_s": scores[label], "candidates": scores}
    return replace(chosen, algorithm=NAME,
                   knobs={"replay_iterations": replay_iterations, "issue": issue}
                   | interference, info=info)
