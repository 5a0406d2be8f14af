"""The recommending half of ``gradsched advise``: what should a practitioner run, and how
much faster is it predicted to be?

Given a compute trace (``gradsched capture compute``, or imported from the user's own
Kineto trace) and a communication model (a comm sweep CSV, a fitted model JSON, or an
inline alpha-beta spec: the ``--comm`` of ``gradsched replay``), :func:`advise` predicts,
with the replay engine (:mod:`gradsched.replay.engine`):

1. **PyTorch DDP, tuned.** The ``ddp`` planner (torch 2.14's buckets, see
   :mod:`gradsched.planners.ddp`: the default is 25 MiB with a 1 MiB first bucket, an
   explicit ``bucket_cap_mb`` also caps the first bucket) at torch's default and at every
   cap of a grid (:data:`DEFAULT_CAPS_MB`, 1 to 256 MiB); the fastest is the DDP setting to
   use. Ties (equal predicted times, e.g. caps that build the same buckets) go to torch's
   default, then to the smallest cap.
2. **Per-bucket caps.** The ``contiguous_optimum`` planner (the fastest contiguous
   grouping of the gradient-ready order, :mod:`gradsched.planners.contiguous`) expressed
   as stock DDP's ``bucket_cap_mb_list`` (torch >= 2.14, :mod:`gradsched.planners.ddp_caps`:
   DDP applies the list when it rebuilds its buckets in ready order after the first
   iteration).
3. **The gradsched plan.** The ``best`` planner (every planner with its knob search,
   :mod:`gradsched.planners.best`), scoring with the executor's issue order
   (``issue=executor``: one fixed launch sequence, what
   :class:`~gradsched.runtime.PlanExecutor` runs) and the given interference.
4. **The decision** (:func:`decide`), each step against the *margin*, the model's own
   error: the best uniform cap only if it beats the user's current setting (torch's
   default unless ``current_cap_mb`` says otherwise), the per-bucket list only if it beats
   the best uniform cap, the gradsched plan only if it beats the better of those two, each
   by more than the margin (predicted gain ``100 * (t_before / t_after - 1)`` percent);
   otherwise: keep the current setting. Every gain is reported with the band gain +- margin,
   the model's held-out error band (not a statistical confidence interval). For a fitted
   model JSON that carries its held-out error (``gradsched fit -o`` writes
   ``meta.heldout_mape_pct`` per collective), the margin is the largest held-out MAPE of
   the collectives the candidates use (all-reduce; reduce-scatter and all-gather for DeAR's
   ``rs_ag`` buckets). Otherwise (a measured sweep, which is interpolated and has no
   held-out error; an inline alpha-beta; an older model JSON) it is
   :data:`~gradsched.experiments.margin.DEFAULT_MARGIN_PCT` (:mod:`.margin`). The margin
   applies a per-message relative error to the whole iteration, which is conservative: the
   compute part of the iteration carries none of the comm model's error. ``--margin-pct``
   overrides it. Both the margin and where it came from are reported.

Every predicted time replays the trace as written (its compute times are those of the
machine it was captured on); the executor's own overhead against DDP on the same buckets
(measured by ``benchmarks/bench_executor_vs_ddp.py``) is not in the prediction, which is
what ``--validate`` (:func:`gradsched.reexec.validate.validate`) measures: stock DDP with the
per-bucket list, at the best uniform cap and at the current setting (and the plan through
the executor, when it is recommended), for real on this machine, with bootstrap 95 %
intervals of the speedups.

**Two-level clusters.** Instead of one comm model, the advice can take a two-level
topology (:mod:`gradsched.costmodel.topology`: nodes x ranks per node, an intra-node and an
inter-node level) and its ``flat`` or ``hierarchical`` collective model
(``--topology FILE --topology-collective ...``, as ``gradsched replay``); the world size is
the topology's, and the margin is the largest held-out MAPE of the levels
(:func:`gradsched.experiments.margin.topology_margin`).

Each prediction is one case of the experiments' grid
(:func:`gradsched.experiments.grid.run_algorithm`: plan, with the replay scoring the
planners that search, and replay). No torch import: the validation, which runs things for
real, is :mod:`gradsched.reexec.validate`. The advice as text, with the commands that apply it, is
:mod:`gradsched.experiments.recommend_text`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.domain import IN_RANGE, RangeShares, row_shares
from gradsched.costmodel.domain_notes import domain_notes
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.grid import run_algorithm, scoring_knobs
from gradsched.experiments.margin import Margin, model_margin
from gradsched.experiments.replica_memory import ReplicaMemory, replica_memory
from gradsched.experiments.scoring import SharedReplayCaches
from gradsched.plan import Plan
from gradsched.planners.ddp import bucket_limits_bytes
from gradsched.planners.ddp_caps import DdpCaps, ddp_caps
from gradsched.replay.engine import ReplayOptions, ReplayResult
from gradsched.ties import faster, tied_min
from gradsched.traces.bundle import ComputeTrace, meta_path

DEFAULT_CAPS_MB: tuple[float, ...] = (1, 2, 4, 8, 16, 25, 32, 64, 128, 256)
"""The ``bucket_cap_mb`` grid swept (MiB), besides torch's default (``None``)."""
PLAN_ALGORITHM = "best"
LIST_ALGORITHM = "contiguous_optimum"
"""The planner whose buckets become the per-bucket caps (``bucket_cap_mb_list``)."""
# the collectives each bucket kind of a plan runs (plan.py: all_reduce, or rs_ag)
COLLECTIVES_OF = {"all_reduce": ("all_reduce",), "rs_ag": ("reduce_scatter", "all_gather"),
                  "reduce_scatter": ("reduce_scatter",)}


# --------------------------------------------------------------------------- inputs
def resolve_world_size(trace: ComputeTrace, model: CommModel, requested: int | None, *,
                       trace_path: str, comm_spec: str, topology: bool = False) -> int:
    """The world size to advise for, checked against both inputs.

    The comm model must hold it (a sweep measured at P ranks predicts P only; an analytic
    or scaled model predicts any). A compute trace whose sidecar records a ``world_size``
    above 1 was captured inside a job of that many ranks (e.g. a Kineto trace of a DDP
    run); advising for another world size would silently mix two jobs, so it is refused.
    With ``topology`` (``comm_spec`` is then the topology file) the world size is the
    topology's ``nodes x ranks_per_node``, and the messages say so.
    """
    held = model.world_sizes()
    if topology:
        return _topology_world(trace, model, requested, trace_path=trace_path,
                               topology_path=comm_spec)
    if requested is None:
        if held is None:
            raise ConfigError(f"--world-size is required: the comm model {comm_spec} "
                              "predicts any world size")
        if len(held) != 1:
            raise ConfigError(f"--world-size is required: the comm model {comm_spec} holds "
                              "world sizes " + ", ".join(map(str, held)))
        world = int(held[0])
    else:
        if requested < 1:
            raise ConfigError(f"--world-size must be >= 1, got {requested}")
        if held is not None and requested not in held:
            raise InputError(
                f"the comm model holds world sizes {', '.join(map(str, held))}, not "
                f"--world-size {requested}: measure a sweep with {requested} ranks, or fit a "
                "model that predicts it (gradsched fit --cross-world-size)", path=comm_spec)
        world = int(requested)
    traced = trace.meta.get("world_size")
    if isinstance(traced, int) and traced > 1 and traced != world:
        raise InputError(
            f"the compute trace was captured in a {traced}-rank job but the comm model is "
            f"for {world} ranks: give a comm sweep or model for {traced} ranks, or capture "
            "the compute trace for the job you advise on", path=meta_path(trace_path),
            field="world_size")
    return world


def _topology_world(trace: ComputeTrace, model: CommModel, requested: int | None, *,
                    trace_path: str, topology_path: str) -> int:
    """:func:`resolve_world_size` for a topology collective model (one world size)."""
    topo = getattr(model, "topology", None)
    if topo is None:
        raise ConfigError(f"{topology_path}: not a topology collective model")
    shape = f"{topo.nodes} nodes x {topo.ranks_per_node} ranks = {topo.world_size}"
    if requested is not None and requested != topo.world_size:
        raise InputError(f"the topology is {shape} ranks, not --world-size {requested}: "
                         "change nodes or ranks_per_node in the topology file, or leave "
                         "--world-size out", path=topology_path, field="nodes")
    traced = trace.meta.get("world_size")
    if isinstance(traced, int) and traced > 1 and traced != topo.world_size:
        raise InputError(
            f"the compute trace was captured in a {traced}-rank job but the topology "
            f"{topology_path} is {shape} ranks: describe the cluster the trace was captured "
            "on, or capture the compute trace for the job you advise on",
            path=meta_path(trace_path), field="world_size")
    return topo.world_size


# --------------------------------------------------------------------------- prediction
@dataclass(frozen=True)
class DDPPoint:
    """DDP at one ``bucket_cap_mb`` (``None`` = torch's default), predicted."""

    bucket_cap_mb: float | None
    first_bucket_mb: float
    n_buckets: int
    iteration_s: float
    shares: RangeShares = IN_RANGE
    """Share of its modelled communication priced outside the measured sizes."""

    @property
    def label(self) -> str:
        if self.bucket_cap_mb is None:
            return "torch default (25 MiB, first bucket 1 MiB)"
        return f"bucket_cap_mb={self.bucket_cap_mb:g} (first bucket {self.first_bucket_mb:g} MiB)"

    def to_dict(self) -> dict[str, Any]:
        return {"bucket_cap_mb": self.bucket_cap_mb, "first_bucket_mb": self.first_bucket_mb,
                "n_buckets": self.n_buckets, "iteration_s": self.iteration_s}


def sweep_ddp(trace: ComputeTrace, model: CommModel, world_size: int,
              caps_mb: Sequence[float], options: ReplayOptions,
              caches: SharedReplayCaches | None = None) -> list[DDPPoint]:
    """Torch's default, then every cap of ``caps_mb`` (sorted, deduplicated); ``caches``:
    replays shared with the other steps of :func:`advise`."""
    bad = [c for c in caps_mb if not (math.isfinite(c) and c > 0)]
    if bad:
        raise ConfigError(f"--caps: every bucket cap must be a number > 0 MiB, got {bad[0]}")
    points = []
    for cap in [None, *sorted(set(float(c) for c in caps_mb))]:
        plan, result = run_algorithm("ddp", trace, model, world_size,
                                     {} if cap is None else {"bucket_cap_mb": cap}, options,
                                     caches=caches)
        first, _ = bucket_limits_bytes(cap, None)
        points.append(DDPPoint(cap, first / 2**20, plan.n_buckets, result.iteration_s,
                               result_shares(result)))
    return points


def pick_ddp(points: Sequence[DDPPoint]) -> DDPPoint:
    """The fastest point; ties (:func:`gradsched.ties.same_time`) go to torch's default,
    then to the smallest cap."""
    tied = [points[i] for i in tied_min(p.iteration_s for p in points)]
    return min(tied, key=lambda p: (p.bucket_cap_mb is not None, p.bucket_cap_mb or 0.0))


def plan_collectives(plan: Plan) -> set[str]:
    """The collectives a plan's buckets run."""
    return {c for b in plan.buckets for c in COLLECTIVES_OF.get(b.collective, (b.collective,))}


@dataclass(frozen=True)
class ListPoint:
    """Stock DDP with per-bucket caps (``bucket_cap_mb_list``): the contiguous optimum's
    buckets (:data:`LIST_ALGORITHM`) as caps (:func:`gradsched.planners.ddp_caps.ddp_caps`),
    predicted."""

    caps: DdpCaps
    plan: Plan
    iteration_s: float
    shares: RangeShares = IN_RANGE

    @property
    def n_buckets(self) -> int:
        return self.caps.n_buckets

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": LIST_ALGORITHM, "bucket_cap_mb_list": list(self.caps.paste_mb),
                "exact_mb": list(self.caps.exact_mb), "n_buckets": self.n_buckets,
                "iteration_s": self.iteration_s, "paste_line": self.caps.paste_line()}


def predict_list(trace: ComputeTrace, model: CommModel, world_size: int,
                 options: ReplayOptions, replay_settings: Mapping[str, Any],
                 caches: SharedReplayCaches | None = None,
                 ) -> tuple[ListPoint | None, str | None]:
    """The per-bucket caps and their predicted time, or (None, why) when the contiguous
    optimum cannot be written as DDP caps (:func:`~gradsched.planners.ddp_caps.ddp_caps`
    names the property)."""
    knobs = scoring_knobs(LIST_ALGORITHM, replay_settings, {})
    plan, result = run_algorithm(LIST_ALGORITHM, trace, model, world_size, knobs, options,
                                 caches=caches)
    try:
        caps = ddp_caps(plan, trace)
    except InputError as exc:
        return None, f"no per-bucket caps: {exc}"
    return ListPoint(caps, plan, result.iteration_s, result_shares(result)), None


def result_shares(result: ReplayResult) -> RangeShares:
    """The out-of-range shares a replay recorded."""
    return row_shares({"comm_below_range_pct": result.comm_below_range_pct,
                       "comm_above_range_pct": result.comm_above_range_pct})


# --------------------------------------------------------------------------- decision
CHOICES = ("keep", "uniform", "list", "plan")
"""What :func:`decide` can recommend: the current setting, the best uniform
``bucket_cap_mb``, the per-bucket ``bucket_cap_mb_list``, the gradsched plan."""


def gain_pct(before_s: float, after_s: float) -> float:
    """Predicted gain of ``after`` over ``before``: ``100 * (before / after - 1)``."""
    return 100.0 * (before_s / after_s - 1.0)


def decide(current_s: float, uniform_s: float, list_s: float | None, plan_s: float,
           margin_pct: float) -> str:
    """One of :data:`CHOICES`: the best uniform cap if it beats the current setting, the
    per-bucket list if it beats the best uniform cap, the plan if it beats the better of
    those two, each by more than ``margin_pct`` (and never on a tie,
    :func:`gradsched.ties.faster`, whatever the margin); else ``keep``. A later step wins
    over an earlier one (each is harder to adopt than the one before)."""
    def beats(before_s: float, after_s: float) -> bool:
        return faster(after_s, before_s) and gain_pct(before_s, after_s) > margin_pct

    choice = "keep"
    if beats(current_s, uniform_s):
        choice = "uniform"
    if list_s is not None and beats(uniform_s, list_s):
        choice = "list"
    ddp_s = uniform_s if list_s is None else min(uniform_s, list_s)
    if beats(ddp_s, plan_s):
        choice = "plan"
    return choice


@dataclass
class Recommendation:
    """The advice: the current DDP setting, tuned DDP (uniform and per-bucket caps), the
    gradsched plan, and which to run (:attr:`choice`)."""

    compute: str
    comm: str
    world_size: int
    model_name: str | None
    batch_size: int | None
    seq_len: int | None
    ddp_sweep: list[DDPPoint]
    ddp_current: DDPPoint
    ddp_best: DDPPoint
    ddp_list: ListPoint | None
    plan: Plan
    plan_s: float
    plan_collectives_per_iter: int
    margin: Margin
    choice: str
    options: dict[str, Any]
    forward_ratio: float | None = None
    notes: list[str] = field(default_factory=list)
    topology_collective: str | None = None
    """``flat``/``hierarchical`` when ``comm`` is a topology file (``--topology``)."""
    device: str | None = None
    """The compute trace's ``device`` (a modelled one says so)."""
    synthetic_compute: bool = False
    """Whether the compute trace is synthetic (a FLOPs model, not a measurement)."""
    memory: ReplicaMemory | None = None
    """A full replica against the trace GPU's memory (None: the GPU's memory is unknown)."""

    @property
    def fits(self) -> bool | None:
        """Whether DDP's full replica fits the trace's GPU (None: not known)."""
        return None if self.memory is None else self.memory.fits

    @property
    def comm_args(self) -> list[str]:
        """The comm options of ``gradsched plan``/``replay`` that name this model."""
        if self.topology_collective is None:
            return ["--comm", self.comm]
        return ["--topology", self.comm, "--topology-collective", self.topology_collective]

    @property
    def use_plan(self) -> bool:
        return self.choice == "plan"

    @property
    def ddp_tuned_s(self) -> float:
        """The better of the best uniform cap and the per-bucket list, predicted."""
        if self.ddp_list is None:
            return self.ddp_best.iteration_s
        return min(self.ddp_best.iteration_s, self.ddp_list.iteration_s)

    @property
    def tuned_gain_pct(self) -> float:
        """Predicted gain of the best uniform cap over the current setting, percent."""
        return gain_pct(self.ddp_current.iteration_s, self.ddp_best.iteration_s)

    @property
    def list_gain_pct(self) -> float | None:
        """Predicted gain of the per-bucket list over the best uniform cap, percent."""
        if self.ddp_list is None:
            return None
        return gain_pct(self.ddp_best.iteration_s, self.ddp_list.iteration_s)

    @property
    def gain_pct(self) -> float:
        """Predicted gain of the plan over the better of the two tuned DDP settings."""
        return gain_pct(self.ddp_tuned_s, self.plan_s)

    def band(self, gain: float) -> dict[str, float | None]:
        """A gain and its band (+- the margin: the model's error, not a statistical CI;
        ``None`` bounds where the error is unknown, :attr:`Margin.band_known`)."""
        if not self.margin.band_known:
            return {"point": gain, "low": None, "high": None}
        return {"point": gain, "low": gain - self.margin.pct, "high": gain + self.margin.pct}

    def to_dict(self) -> dict[str, Any]:
        """Everything a machine needs (the plan itself under ``plan``)."""
        listed = None
        if self.ddp_list is not None:
            listed = self.ddp_list.to_dict() | {
                "gain_over_best_uniform_pct": self.band(self.list_gain_pct or 0.0)}
        return {
            "compute": self.compute, "comm": self.comm,
            "topology_collective": self.topology_collective, "world_size": self.world_size,
            "model": self.model_name, "batch_size": self.batch_size, "seq_len": self.seq_len,
            "replay": dict(self.options), "forward_ratio": self.forward_ratio,
            "ddp": {"current": self.ddp_current.to_dict(), "best": self.ddp_best.to_dict(),
                    "tuned_gain_pct": self.tuned_gain_pct,
                    "tuned_gain_band_pct": self.band(self.tuned_gain_pct),
                    "sweep": [p.to_dict() for p in self.ddp_sweep], "list": listed},
            "plan": {"algorithm": PLAN_ALGORITHM, "winner": self.plan.info.get("winner"),
                     "iteration_s": self.plan_s, "n_buckets": self.plan.n_buckets,
                     "n_collectives": self.plan_collectives_per_iter,
                     "gain_over_tuned_ddp_pct": self.gain_pct,
                     "gain_band_pct": self.band(self.gain_pct), "plan": self.plan.to_dict()},
            "margin_pct": self.margin.pct, "margin_source": self.margin.source,
            "band_known": self.margin.band_known,
            "recommendation": (RECOMMENDATION_NAMES[self.choice] if self.fits is not False
                               else DOES_NOT_FIT),
            "memory": None if self.memory is None else self.memory.to_dict(),
            "device": self.device, "synthetic_compute": self.synthetic_compute,
            "notes": list(self.notes),
        }


DOES_NOT_FIT = "does-not-fit"
"""The JSON's ``recommendation`` where a full replica does not fit the trace's GPU
(:mod:`gradsched.experiments.replica_memory`): no DDP setting can run; the times of the
candidates are still given, as what the model says were memory no object."""

RECOMMENDATION_NAMES = {"keep": "keep-current", "uniform": "ddp-bucket-cap-mb",
                        "list": "ddp-bucket-cap-mb-list", "plan": "gradsched-plan"}
"""The JSON's ``recommendation`` for each of :data:`CHOICES`."""


@dataclass(frozen=True)
class AdviceSettings:
    """The settings of one ``gradsched advise`` (DDP), built and checked once where the
    command parses its arguments (``commands/advise.py``): ``compute`` and ``comm`` name the
    trace and the comm model as the advice prints them; ``caps_mb`` the uniform caps swept
    (MiB, :data:`DEFAULT_CAPS_MB`); ``interference`` the replay's calibrated interference
    (``--interference``); ``iterations`` per replay; ``margin_pct`` overrides the model's
    margin; ``forward_ratio`` as the trace was loaded with; ``topology_collective``: ``comm``
    is a topology file and the model its ``flat``/``hierarchical`` collective model;
    ``current_cap_mb`` the user's current ``bucket_cap_mb`` (None: torch's default);
    ``grad_accum`` micro-batches per optimizer step. ``replay``: the replay options every
    candidate is replayed with (the executor's issue order and the interference)."""

    compute: str
    comm: str
    caps_mb: Sequence[float] = DEFAULT_CAPS_MB
    interference: Mapping[str, float] = field(default_factory=dict)
    iterations: int = 5
    margin_pct: float | None = None
    forward_ratio: float | None = None
    topology_collective: str | None = None
    current_cap_mb: float | None = None
    grad_accum: int = 1
    replay: ReplayOptions = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "caps_mb", tuple(self.caps_mb))
        object.__setattr__(self, "interference", dict(self.interference or {}))
        object.__setattr__(self, "replay", ReplayOptions(
            iterations=self.iterations, grad_accum=self.grad_accum, **self.replay_settings))

    @property
    def replay_settings(self) -> dict[str, Any]:
        """The replay's issue order (the executor's) and interference."""
        return {"issue": "executor", **self.interference}


def advise(trace: ComputeTrace, model: CommModel, world_size: int,
           settings: AdviceSettings) -> Recommendation:
    """The current DDP setting (torch's default, or ``settings.current_cap_mb``) vs the best
    uniform cap vs the per-bucket list vs the gradsched plan on one (trace, comm model,
    world size); ``settings.topology_collective`` says that ``settings.comm`` is a topology
    file and ``model`` its ``flat``/``hierarchical`` collective model. Every candidate is
    replayed (and ``best`` scores its own) per optimizer step of ``settings.grad_accum``
    micro-batches (:mod:`gradsched.replay.engine`), so the gains are shares of a step."""
    compute, comm, iterations = settings.compute, settings.comm, settings.iterations
    current_cap_mb, grad_accum = settings.current_cap_mb, settings.grad_accum
    inter, options = settings.interference, settings.replay
    grid = list(settings.caps_mb) + ([current_cap_mb] if current_cap_mb is not None else [])
    # One cache of replays for every step: the DDP caps, the per-bucket caps and the plan
    # are all among `best`'s candidates, replayed with the same options.
    caches = SharedReplayCaches(grad_accum)
    sweep = sweep_ddp(trace, model, world_size, grid, options, caches)
    current = next(p for p in sweep if p.bucket_cap_mb == current_cap_mb)
    best_ddp = pick_ddp(sweep)
    replay_settings = settings.replay_settings
    listed, why_not = predict_list(trace, model, world_size, options, replay_settings, caches)
    knobs = scoring_knobs(PLAN_ALGORITHM, replay_settings, {"replay_iterations": iterations})
    plan, result = run_algorithm(PLAN_ALGORITHM, trace, model, world_size, knobs, options,
                                 caches=caches)
    used = {"all_reduce", *plan_collectives(plan)}
    margin = model_margin(model, comm, used, settings.margin_pct, world_size)
    choice = decide(current.iteration_s, best_ddp.iteration_s,
                    None if listed is None else listed.iteration_s, result.iteration_s,
                    margin.pct)
    notes = [] if why_not is None else [why_not]
    if grad_accum != 1:
        notes.append(f"times are per optimizer step of {grad_accum} micro-batches (the first "
                     f"{grad_accum - 1} under no_sync(): no communication); the exposed "
                     "communication is that of one micro-batch, its share of the step about "
                     f"1/{grad_accum} of what it is without accumulation")
    notes += domain_notes(
        model, world_size, comm,
        [("DDP's current setting", current.shares), ("the best uniform cap", best_ddp.shares),
         ("the per-bucket caps", None if listed is None else listed.shares),
         ("the gradsched plan", result_shares(result))], sorted(used))
    if not inter:
        notes.append("no interference calibration: the per-collective CPU cost and the "
                     "compute/communication slowdowns of the ranks sharing a machine are not "
                     "modelled (measure them with gradsched reexec interference and pass "
                     "--interference)")
    memory = replica_memory(trace)
    if memory is not None and not memory.fits:
        notes.insert(0, f"memory: {memory.text()}: DDP cannot run this model on this GPU, "
                        "whatever its buckets; shard it (gradsched advise --sharded)")
    if plan.update == "per_layer":
        notes.append("the plan updates per layer (the executor applies the last update "
                     "lazily: call ex.flush() before reading weights; docs/executor.md)")
    return Recommendation(
        compute=compute, comm=comm, world_size=world_size,
        model_name=trace.meta.get("model"), batch_size=trace.meta.get("batch_size"),
        seq_len=trace.meta.get("seq_len"), ddp_sweep=sweep, ddp_current=current,
        ddp_best=best_ddp, ddp_list=listed, plan=plan, plan_s=result.iteration_s,
        plan_collectives_per_iter=result.n_collectives, margin=margin, choice=choice,
        options={"iterations": iterations, **replay_settings}
        | ({} if grad_accum == 1 else {"grad_accum": grad_accum}),
        forward_ratio=settings.forward_ratio, notes=notes,
        topology_collective=settings.topology_collective,
        memory=memory, device=trace.meta.get("device"),
        synthetic_compute=bool(trace.meta.get("synthetic", False)))
