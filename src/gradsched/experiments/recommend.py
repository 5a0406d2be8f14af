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
2. **The gradsched plan.** The ``best`` planner (every planner with its knob search,
   :mod:`gradsched.planners.best`), scoring with the executor's issue order
   (``issue=executor``: one fixed launch sequence, what
   :class:`~gradsched.runtime.PlanExecutor` runs) and the given interference.
3. **The decision.** The plan is recommended only if its predicted gain over tuned DDP,
   ``100 * (t_ddp / t_plan - 1)`` percent, exceeds the *margin*: the model's own error.
   For a fitted model JSON that carries its held-out error (``gradsched fit -o`` writes
   ``meta.heldout_mape_pct`` per collective), the margin is the largest held-out MAPE of
   the collectives the two plans use (all-reduce; reduce-scatter and all-gather for DeAR's
   ``rs_ag`` buckets). Otherwise (a measured sweep, which is interpolated and has no
   held-out error; an inline alpha-beta; an older model JSON) it is
   :data:`DEFAULT_MARGIN_PCT`. The margin applies a per-message relative error to the
   whole iteration, which is conservative: the compute part of the iteration carries none
   of the comm model's error. ``--margin-pct`` overrides it. Both the margin and where it
   came from are reported.

Every predicted time replays the trace as written (its compute times are those of the
machine it was captured on); the executor's own overhead against DDP on the same buckets
(measured by ``benchmarks/bench_executor_vs_ddp.py``) is not in the prediction, which is
what ``--validate`` (:func:`gradsched.advise.validate`) measures: the recommended plan
through the executor and PyTorch DDP itself at the recommended cap (and at torch's
default, if that differs), for real on this machine, with a bootstrap 95 % interval of
the speedup.

**Two-level clusters.** Instead of one comm model, the advice can take a two-level
topology (:mod:`gradsched.costmodel.topology`: nodes x ranks per node, an intra-node and an
inter-node level) and its ``flat`` or ``hierarchical`` collective model
(``--topology FILE --topology-collective ...``, as ``gradsched replay``); the world size is
the topology's, and the margin is the largest held-out MAPE of the levels
(:func:`topology_margin`).

Each prediction is one case of the experiments' grid
(:func:`gradsched.experiments.grid.run_algorithm`: plan, with the replay scoring the
planners that search, and replay). No torch import: the validation, which runs things for
real, is :mod:`gradsched.advise`.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.grid import run_algorithm, scoring_knobs
from gradsched.plan import Plan
from gradsched.planners.ddp import bucket_limits_bytes
from gradsched.replay.engine import ReplayOptions
from gradsched.traces.bundle import ComputeTrace, meta_path

DEFAULT_CAPS_MB: tuple[float, ...] = (1, 2, 4, 8, 16, 25, 32, 64, 128, 256)
"""The ``bucket_cap_mb`` grid swept (MiB), besides torch's default (``None``)."""
DEFAULT_MARGIN_PCT = 5.0
"""Margin (percent) when the comm model states no held-out error of its own."""
PLAN_ALGORITHM = "best"
TIE_REL = 1e-9
"""Predicted times within this relative difference are a tie."""
# the collectives each bucket kind of a plan runs (plan.py: all_reduce, or rs_ag)
COLLECTIVES_OF = {"all_reduce": ("all_reduce",), "rs_ag": ("reduce_scatter", "all_gather")}


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


@dataclass(frozen=True)
class Margin:
    """How much faster than tuned DDP a plan must be predicted (percent), and why."""

    pct: float
    source: str


def model_margin(model: CommModel, comm_spec: str, collectives: Iterable[str],
                 override_pct: float | None = None) -> Margin:
    """The margin (see the module docstring): ``override_pct``; else the largest held-out
    MAPE in the model JSON's ``meta`` over ``collectives``; else the default."""
    if override_pct is not None:
        if not (math.isfinite(override_pct) and override_pct >= 0):
            raise ConfigError(f"--margin-pct must be a finite number >= 0, got {override_pct}")
        return Margin(float(override_pct), "--margin-pct")
    needed = sorted(set(collectives))
    if getattr(model, "topology", None) is not None:
        return topology_margin(model, comm_spec, needed)
    meta = getattr(model, "meta", None) or {}
    held = meta.get("heldout_mape_pct") if comm_spec.endswith(".json") else None
    if isinstance(held, Mapping) and held and all(c in held for c in needed):
        worst = max(needed, key=lambda c: float(held[c]))
        return Margin(float(held[worst]),
                      f"held-out MAPE of the fit ({worst}, the largest of "
                      f"{', '.join(needed)}; meta.heldout_mape_pct of {comm_spec})")
    if comm_spec.endswith(".csv"):
        why = "the comm spec is a measured sweep (interpolated, no held-out error)"
    elif comm_spec.endswith(".json"):
        why = ("the model JSON states no held-out error for "
               + ", ".join(needed) + " (refit with gradsched fit -o to record it)")
    else:
        why = "the comm spec is an inline model with no error of its own"
    return Margin(DEFAULT_MARGIN_PCT, f"default {DEFAULT_MARGIN_PCT:g} %: {why}")


def level_collectives(model: CommModel, needed: Iterable[str]) -> dict[str, set[str]]:
    """The collectives each level of a topology collective model runs for ``needed``
    (:mod:`gradsched.costmodel.topology`): the hierarchical all-reduce runs reduce-scatter
    and all-gather inside the node and the all-reduce across; the flat ring paces each
    collective by both levels' own."""
    wanted = set(needed)
    if model.kind != "topology-hierarchical":
        return {"intra": wanted, "inter": wanted}
    intra = wanted - {"all_reduce"}
    if "all_reduce" in wanted:
        intra |= {"reduce_scatter", "all_gather"}
    return {"intra": intra, "inter": wanted}


def topology_margin(model: CommModel, topology_path: str, needed: Sequence[str]) -> Margin:
    """The margin of a topology collective model: the largest held-out MAPE
    (``meta.heldout_mape_pct`` of a fitted level, ``gradsched fit -o``) over both levels and
    the collectives each runs (:func:`level_collectives`). Both models are per-message
    sums (hierarchical) or maxima (flat) of the level times, whose relative error is at
    most the largest of the levels'. A level without a held-out error (a measured sweep,
    an inline or identified model) gives :data:`DEFAULT_MARGIN_PCT`."""
    topo = model.topology  # type: ignore[attr-defined]
    worst: tuple[float, str] | None = None
    for level, collectives in level_collectives(model, needed).items():
        held = (getattr(getattr(topo, level), "meta", None) or {}).get("heldout_mape_pct")
        if not isinstance(held, Mapping) or not all(c in held for c in collectives):
            return Margin(DEFAULT_MARGIN_PCT,
                          f"default {DEFAULT_MARGIN_PCT:g} %: the {level}-node level of "
                          f"topology {topology_path} states no held-out error for "
                          + ", ".join(sorted(collectives)))
        for c in collectives:
            if worst is None or float(held[c]) > worst[0]:
                worst = (float(held[c]), f"{level}-node {c}")
    assert worst is not None
    return Margin(worst[0], f"held-out MAPE of the topology's levels ({worst[1]}, the "
                            f"largest; meta.heldout_mape_pct of the levels of {topology_path})")


# --------------------------------------------------------------------------- prediction
@dataclass(frozen=True)
class DDPPoint:
    """DDP at one ``bucket_cap_mb`` (``None`` = torch's default), predicted."""

    bucket_cap_mb: float | None
    first_bucket_mb: float
    n_buckets: int
    iteration_s: float

    @property
    def label(self) -> str:
        if self.bucket_cap_mb is None:
            return "torch default (25 MiB, first bucket 1 MiB)"
        return f"bucket_cap_mb={self.bucket_cap_mb:g} (first bucket {self.first_bucket_mb:g} MiB)"

    def to_dict(self) -> dict[str, Any]:
        return {"bucket_cap_mb": self.bucket_cap_mb, "first_bucket_mb": self.first_bucket_mb,
                "n_buckets": self.n_buckets, "iteration_s": self.iteration_s}


def sweep_ddp(trace: ComputeTrace, model: CommModel, world_size: int,
              caps_mb: Sequence[float], options: ReplayOptions) -> list[DDPPoint]:
    """Torch's default, then every cap of ``caps_mb`` (sorted, deduplicated)."""
    bad = [c for c in caps_mb if not (math.isfinite(c) and c > 0)]
    if bad:
        raise ConfigError(f"--caps: every bucket cap must be a number > 0 MiB, got {bad[0]}")
    points = []
    for cap in [None, *sorted(set(float(c) for c in caps_mb))]:
        plan, result = run_algorithm("ddp", trace, model, world_size,
                                     {} if cap is None else {"bucket_cap_mb": cap}, options)
        first, _ = bucket_limits_bytes(cap, None)
        points.append(DDPPoint(cap, first / 2**20, plan.n_buckets, result.iteration_s))
    return points


def pick_ddp(points: Sequence[DDPPoint]) -> DDPPoint:
    """The fastest point; ties (within :data:`TIE_REL`) go to torch's default, then to the
    smallest cap."""
    fastest = min(p.iteration_s for p in points)
    tied = [p for p in points if p.iteration_s <= fastest * (1 + TIE_REL)]
    return min(tied, key=lambda p: (p.bucket_cap_mb is not None, p.bucket_cap_mb or 0.0))


def plan_collectives(plan: Plan) -> set[str]:
    """The collectives a plan's buckets run."""
    return {c for b in plan.buckets for c in COLLECTIVES_OF.get(b.collective, (b.collective,))}


@dataclass
class Recommendation:
    """The advice: tuned DDP, the gradsched plan, and which to run."""

    compute: str
    comm: str
    world_size: int
    model_name: str | None
    batch_size: int | None
    seq_len: int | None
    ddp_sweep: list[DDPPoint]
    ddp_default: DDPPoint
    ddp_best: DDPPoint
    plan: Plan
    plan_s: float
    plan_collectives_per_iter: int
    gain_pct: float
    margin: Margin
    use_plan: bool
    options: dict[str, Any]
    forward_ratio: float | None = None
    notes: list[str] = field(default_factory=list)
    topology_collective: str | None = None
    """``flat``/``hierarchical`` when ``comm`` is a topology file (``--topology``)."""

    @property
    def comm_args(self) -> list[str]:
        """The comm options of ``gradsched plan``/``replay`` that name this model."""
        if self.topology_collective is None:
            return ["--comm", self.comm]
        return ["--topology", self.comm, "--topology-collective", self.topology_collective]

    @property
    def tuned_gain_pct(self) -> float:
        """Predicted gain of tuned DDP over torch's default, percent."""
        return 100.0 * (self.ddp_default.iteration_s / self.ddp_best.iteration_s - 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Everything a machine needs (the plan itself under ``plan``)."""
        return {
            "compute": self.compute, "comm": self.comm,
            "topology_collective": self.topology_collective, "world_size": self.world_size,
            "model": self.model_name, "batch_size": self.batch_size, "seq_len": self.seq_len,
            "replay": dict(self.options), "forward_ratio": self.forward_ratio,
            "ddp": {"default": self.ddp_default.to_dict(), "best": self.ddp_best.to_dict(),
                    "tuned_gain_pct": self.tuned_gain_pct,
                    "sweep": [p.to_dict() for p in self.ddp_sweep]},
            "plan": {"algorithm": PLAN_ALGORITHM, "winner": self.plan.info.get("winner"),
                     "iteration_s": self.plan_s, "n_buckets": self.plan.n_buckets,
                     "n_collectives": self.plan_collectives_per_iter,
                     "gain_over_tuned_ddp_pct": self.gain_pct, "plan": self.plan.to_dict()},
            "margin_pct": self.margin.pct, "margin_source": self.margin.source,
            "recommendation": "gradsched-plan" if self.use_plan else "pytorch-ddp",
            "notes": list(self.notes),
        }


def advise(trace: ComputeTrace, model: CommModel, world_size: int, *, compute: str,
           comm: str, caps_mb: Sequence[float] = DEFAULT_CAPS_MB,
           interference: Mapping[str, float] | None = None, iterations: int = 5,
           margin_pct: float | None = None, forward_ratio: float | None = None,
           topology_collective: str | None = None) -> Recommendation:
    """Tuned DDP vs the gradsched plan on one (trace, comm model, world size);
    ``topology_collective`` says that ``comm`` is a topology file and ``model`` its
    ``flat``/``hierarchical`` collective model."""
    inter = dict(interference or {})
    options = ReplayOptions(iterations=iterations, issue="executor", **inter)
    sweep = sweep_ddp(trace, model, world_size, caps_mb, options)
    best_ddp = pick_ddp(sweep)
    knobs = scoring_knobs(PLAN_ALGORITHM, {"issue": "executor", **inter},
                          {"replay_iterations": iterations})
    plan, result = run_algorithm(PLAN_ALGORITHM, trace, model, world_size, knobs, options)
    gain = 100.0 * (best_ddp.iteration_s / result.iteration_s - 1.0)
    margin = model_margin(model, comm, {"all_reduce", *plan_collectives(plan)}, margin_pct)
    notes = []
    if not inter:
        notes.append("no interference calibration: the per-collective CPU cost and the "
                     "compute/communication slowdowns of the ranks sharing a machine are not "
                     "modelled (measure them with gradsched reexec interference and pass "
                     "--interference)")
    if plan.update == "per_layer":
        notes.append("the plan updates per layer (the executor applies the last update "
                     "lazily: call ex.flush() before reading weights; docs/executor.md)")
    return Recommendation(
        compute=compute, comm=comm, world_size=world_size,
        model_name=trace.meta.get("model"), batch_size=trace.meta.get("batch_size"),
        seq_len=trace.meta.get("seq_len"), ddp_sweep=sweep, ddp_default=sweep[0],
        ddp_best=best_ddp, plan=plan, plan_s=result.iteration_s,
        plan_collectives_per_iter=result.n_collectives, gain_pct=gain, margin=margin,
        use_plan=gain > margin.pct,
        options={"iterations": iterations, "issue": "executor", **inter},
        forward_ratio=forward_ratio, notes=notes, topology_collective=topology_collective)


# --------------------------------------------------------------------------- commands
def ddp_code(point: DDPPoint) -> str:
    """The DDP constructor call for ``point``."""
    if point.bucket_cap_mb is None:
        return "DistributedDataParallel(model)  # torch's default buckets"
    return f"DistributedDataParallel(model, bucket_cap_mb={point.bucket_cap_mb:g})"


def plan_command(rec: Recommendation, output: str = "plan.json") -> list[str]:
    """``gradsched plan`` that writes the recommended plan."""
    cmd = ["gradsched", "plan", "--compute", rec.compute, *rec.comm_args,
           "--world-size", str(rec.world_size), "--algorithm", PLAN_ALGORITHM,
           "--knob", f"{PLAN_ALGORITHM}.issue=executor",
           "--knob", f"{PLAN_ALGORITHM}.replay_iterations={rec.options['iterations']}"]
    for key in ("collective_cpu_s", "compute_slowdown", "comm_slowdown"):
        if key in rec.options:
            cmd += ["--knob", f"{PLAN_ALGORITHM}.{key}={rec.options[key]!r}"]
    if rec.forward_ratio is not None:
        cmd += ["--forward-ratio", f"{rec.forward_ratio:g}"]
    return [*cmd, "-o", output]


def run_command(rec: Recommendation, plan_file: str = "plan.json", backend: str = "gloo",
                model_name: str | None = None, batch_size: int | None = None) -> list[str]:
    """``gradsched run`` that times the plan against DDP at the recommended cap."""
    cap = rec.ddp_best.bucket_cap_mb
    cmd = ["gradsched", "run", "--plan", plan_file, "--baseline", "ddp",
           "--bucket-cap-mb", "default" if cap is None else f"{cap:g}",
           "--model", str(model_name or rec.model_name or "MODEL"),
           "--batch-size", str(batch_size or rec.batch_size or "BATCH"),
           "--world-size", str(rec.world_size), "--backend", backend]
    if rec.seq_len:
        cmd += ["--seq-len", str(rec.seq_len)]
    return [*cmd, "-o", "measured.csv"]


def _comm_label(rec: Recommendation) -> str:
    if rec.topology_collective is None:
        return f"comm {rec.comm}"
    return f"topology {rec.comm} ({rec.topology_collective} collectives)"


def _faster(gain_pct: float) -> str:
    """``2.0`` -> ``2.00 % faster``; ``-1.0`` -> ``1.00 % slower``."""
    return f"{abs(gain_pct):.2f} % {'faster' if gain_pct >= 0 else 'slower'}"


def _pct(value: float) -> str:
    return f"{value:+.2f} %"


def render(rec: Recommendation, *, plan_out: str | None = None, backend: str = "gloo",
           validate_hint: str | None = None) -> str:
    """The human text of the advice."""
    who = rec.model_name or "the traced model"
    batch = f", batch {rec.batch_size} per rank" if rec.batch_size else ""
    lines = [f"gradsched advise: {who}{batch}, {rec.world_size} ranks",
             f"  compute trace {rec.compute}; {_comm_label(rec)}",
             f"predicted iteration time (replay, executor issue order, "
             f"{rec.options['iterations']} iterations):"]
    rows = [(f"PyTorch DDP, {rec.ddp_default.label}", rec.ddp_default.iteration_s,
             f"{rec.ddp_default.n_buckets} buckets", "")]
    rows.append((f"PyTorch DDP, tuned: {rec.ddp_best.label}", rec.ddp_best.iteration_s,
                 f"{rec.ddp_best.n_buckets} buckets", f"{_pct(rec.tuned_gain_pct)} vs default"))
    winner = rec.plan.info.get("winner", PLAN_ALGORITHM)
    rows.append((f"gradsched plan ({PLAN_ALGORITHM}: {winner})", rec.plan_s,
                 f"{rec.plan.n_buckets} buckets, {rec.plan_collectives_per_iter} collectives",
                 f"{_pct(rec.gain_pct)} vs tuned DDP"))
    width = max(len(r[0]) for r in rows)
    for name, seconds, size, gain in rows:
        lines.append(f"  {name:<{width}}  {seconds:10.6g} s  {size:<30} {gain}".rstrip())
    sweep = ", ".join(f"{'default' if p.bucket_cap_mb is None else f'{p.bucket_cap_mb:g}'}:"
                      f"{p.iteration_s:.6g}" for p in rec.ddp_sweep)
    lines.append(f"  DDP sweep (bucket_cap_mb: seconds): {sweep}")
    lines.append(f"margin: {rec.margin.pct:.3g} % ({rec.margin.source})")
    ddp_line = ddp_code(rec.ddp_best)
    if rec.use_plan:
        out = plan_out or "plan.json"
        lines += [
            f"RECOMMENDATION: run the gradsched plan: predicted {rec.gain_pct:.2f} % faster "
            f"than tuned DDP, more than the {rec.margin.pct:.3g} % margin.",
            f"  1. make the plan:  {shlex.join(plan_command(rec, out))}"
            + (f"  (already written: {plan_out})" if plan_out else ""),
            f"  2. time it against tuned DDP:  "
            f"{shlex.join(run_command(rec, out, backend))}",
            f"  3. in your script: ex = PlanExecutor(model, Plan.load({out!r}), optimizer); "
            "loss.backward(); ex.step()  (instead of DDP; see docs/executor.md)",
            f"  otherwise use {ddp_line}",
        ]
    else:
        lines += [
            f"RECOMMENDATION: use PyTorch DDP: {ddp_line}",
            f"  the gradsched plan is predicted {_faster(rec.gain_pct)} than tuned DDP, "
            f"not more than the {rec.margin.pct:.3g} % margin: not worth switching.",
        ]
    lines += [f"note: {n}" for n in rec.notes]
    if validate_hint:
        lines.append(validate_hint)
    return "\n".join(lines) + "\n"
