"""The re-execution experiment: predict each plan's iteration time, then run it for real.

For every *case* (model x batch size x world size x network):

1. **Plans.** Every configured planner (``wfbp``, ``syncsgd``, ``ddp``, ..., ``best``)
   makes its plan from the committed compute trace and the matching committed gloo sweep
   (``traces/comm/cpu/gloo-<network>-p<P>.csv``). Plans that the executor would run
   identically (same buckets, tensors, collectives, chunks, priorities and update mode;
   the executor ignores ``release_s``, ``channels`` and per-bucket ``algorithm``) share
   one measurement; the CSV keeps one row per algorithm and says which plan it ran.
2. **Measured.** One launch per case runs, on every rank, ``rounds`` rounds; each round
   runs every *item* (each distinct plan through :class:`~gradsched.runtime.PlanExecutor`,
   PyTorch DDP itself at each configured ``bucket_cap_mb``, and a *compute-only control*:
   forward, backward and SGD step with no communication at all) for ``warmup`` untimed
   and ``iters`` timed iterations, in a random order drawn anew for every round from the
   seed (:func:`round_order`), so that neither a drift of the machine's load nor the item
   before it biases an item. Timing is that of ``gradsched run``
   (:mod:`gradsched.runtime.bench`): the period between starts of consecutive iterations,
   the maximum over ranks. The 1-minute load average is read before every item, and the
   CPU cores used by anything but the ranks during it (``foreign_cpu_cores``,
   :mod:`gradsched.reexec.load`); a case does not start while other work keeps the
   machine busy (``allow_load`` overrides, and the flags say so).
3. **Predicted** (:func:`collect`). The committed trace's compute times are CPU times of
   one uncontended thread (``clock: cpu-thread-time``); the ranks of the real run share the
   machine's cores (with each other and, on a shared machine, with other jobs), so their
   compute runs slower by a factor the trace cannot know. The *compute scale* is therefore
   measured in the same launch: ``median(compute-only control) / (sum of the trace's
   forward, backward and update times)``; every compute time of the trace is multiplied
   by it (the per-layer shape stays the trace's), so a plan without communication would be
   predicted exactly at the control's median. ``predicted_s`` replays each plan on the
   scaled trace, with the executor's issue order (one fixed sequence per iteration, see
   :mod:`gradsched.replay.engine`: what the executor can do on a process group, not the
   dynamic priority scheduling some algorithms assume); ``predicted_interference_s``
   also applies the calibrated interference
   (per-collective compute cost and compute / communication slowdowns,
   :mod:`gradsched.reexec.interference`); ``predicted_raw_s`` is
   the replay of the committed trace as it is (scale 1), for reference.

PyTorch DDP itself (``ddp-native-<cap>``) is predicted with the ``ddp`` planner at the
same cap (DDP's 1 MiB first bucket and its bucket-closing rule).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import random
import re
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import ConfigError, InputError
from gradsched.io import read_json, read_text, write_csv_atomic, write_json_atomic
from gradsched.provenance import machine_versions

ALGORITHMS: tuple[str, ...] = ("wfbp", "syncsgd", "ddp", "horovod", "mgwfbp", "oasr", "dear",
                               "bytescheduler", "best")
NETWORKS: dict[str, str | None] = {"loopback": None, "tbf1gbit": "1gbit",
                                   "tbf100mbit": "100mbit"}
CONTROL = "compute-only"
ITERATION_COLUMNS = ("case", "model", "batch_size", "world_size", "network", "item", "kind",
                     "round", "position", "iteration", "iteration_s", "load_avg_1m",
                     "foreign_cpu_cores", "started_at")
MEASURED_COLUMNS = (
    "case", "model", "batch_size", "world_size", "bandwidth", "algorithm", "kind", "item",
    "n_buckets", "n_collectives", "update", "predicted_raw_s", "compute_scale",
    "predicted_s", "predicted_interference_s", "predicted_dynamic_s", "compute_slowdown",
    "comm_slowdown", "collective_cpu_s",
    "measured_s", "measured_p10_s", "measured_p90_s", "measured_mean_s", "iters", "rounds",
    "load_avg", "load_avg_min", "load_avg_max", "foreign_cpu_cores_max", "n_flagged_runs",
    "bound_s",
)


# --------------------------------------------------------------------------- config
@dataclass(frozen=True)
class Case:
    """One (model, batch size, world size, network) setting."""

    name: str
    model: str
    batch_size: int
    world_size: int
    network: str
    compute: str  # compute trace CSV
    comm: str  # comm trace CSV (one world size) or fitted model JSON
    seq_len: int | None = None

    @property
    def rate(self) -> str | None:
        """The ``tc`` rate of the emulated cluster, or None for loopback."""
        return NETWORKS[self.network]


@dataclass(frozen=True)
class Settings:
    """How every case is measured and predicted."""

    algorithms: tuple[str, ...] = ALGORITHMS
    # None: DDP constructed without bucket_cap_mb (what a user gets: 25 MiB, 1 MiB first)
    ddp_bucket_cap_mb: tuple[float | None, ...] = (None, 25.0, 1.0)
    knobs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    warmup: int = 1
    iters: int = 3
    rounds: int = 2
    threads: int = 1
    backend: str = "gloo"
    seed: int = 0
    timeout_s: float = 600.0
    replay_iterations: int = 5
    allow_load: bool = False  # measure although other work uses the machine (flagged)

    def __post_init__(self) -> None:
        if self.iters < 1 or self.warmup < 0 or self.rounds < 1:
            raise ConfigError("reexec: iters >= 1, warmup >= 0 and rounds >= 1 are required")
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError(f"reexec: backend must be gloo or nccl, not {self.backend!r}")
        for cap in self.ddp_bucket_cap_mb:
            if cap is not None and not 0 < cap < math.inf:
                raise ConfigError(f"reexec: ddp_bucket_cap_mb must be > 0, got {cap}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["algorithms"] = list(self.algorithms)
        out["ddp_bucket_cap_mb"] = list(self.ddp_bucket_cap_mb)
        out["knobs"] = {k: dict(v) for k, v in self.knobs.items()}
        return out


_CASE_KEYS = {"name", "model", "batch_size", "world_size", "network", "compute", "comm",
              "seq_len"}
_SETTING_KEYS = {f for f in Settings.__dataclass_fields__}


def load_config(path: str | Path) -> tuple[list[Case], Settings]:
    """Read ``config/reexec.yaml`` (mapping ``reexec`` with ``settings`` and ``cases``)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", path=path)
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", path=path,
                         line=mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping 'reexec'", path=path)
    spec = data.get("reexec", data)
    if not isinstance(spec, dict):
        raise InputError("expected a mapping 'reexec'", path=path)
    return parse_cases(spec.get("cases") or [], path), parse_settings(spec.get("settings") or {},
                                                                      path)


def _cap(value: Any, where: str | Path) -> float | None:
    """A ``ddp_bucket_cap_mb`` entry: a number of MiB, or ``default`` (None)."""
    if value is None or value == "default":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"ddp_bucket_cap_mb entries are MiB or 'default', got {value!r}",
                         path=where, field="settings.ddp_bucket_cap_mb")
    return float(value)


def parse_settings(raw: Mapping[str, Any], where: str | Path = "<config>") -> Settings:
    """``settings:`` mapping -> :class:`Settings` (unknown keys are refused)."""
    unknown = set(raw) - _SETTING_KEYS
    if unknown:
        raise InputError(f"unknown settings key(s) {sorted(unknown)}; known: "
                         f"{sorted(_SETTING_KEYS)}", path=where, field="settings")
    values = dict(raw)
    for key in ("algorithms", "ddp_bucket_cap_mb"):
        if key in values:
            values[key] = tuple(values[key])
    if "ddp_bucket_cap_mb" in values:
        values["ddp_bucket_cap_mb"] = tuple(_cap(v, where) for v in values["ddp_bucket_cap_mb"])
    settings = Settings(**values)
    from gradsched.replay.compare import expand_algorithms

    expand_algorithms(list(settings.algorithms))
    return settings


def parse_cases(raw: Sequence[Mapping[str, Any]], where: str | Path = "<config>") -> list[Case]:
    """``cases:`` list -> :class:`Case` objects; ``comm`` defaults to the committed sweep."""
    cases = []
    names: set[str] = set()
    for i, entry in enumerate(raw):
        unknown = set(entry) - _CASE_KEYS
        if unknown:
            raise InputError(f"cases[{i}]: unknown key(s) {sorted(unknown)}", path=where)
        for key in ("model", "batch_size", "world_size", "network", "compute"):
            if key not in entry:
                raise InputError(f"cases[{i}]: missing {key!r}", path=where)
        network = str(entry["network"])
        if network not in NETWORKS:
            raise InputError(f"cases[{i}]: network must be one of {sorted(NETWORKS)}, not "
                             f"{network!r}", path=where)
        world = int(entry["world_size"])
        if world < 2:
            raise InputError(f"cases[{i}]: world_size must be >= 2", path=where)
        comm = str(entry.get("comm") or f"traces/comm/cpu/gloo-{network}-p{world}.csv")
        name = str(entry.get("name") or
                   f"{entry['model']}-b{entry['batch_size']}-p{world}-{network}")
        if name in names:
            raise InputError(f"cases[{i}]: a second case named {name!r}", path=where)
        names.add(name)
        cases.append(Case(name=name, model=str(entry["model"]),
                          batch_size=int(entry["batch_size"]), world_size=world,
                          network=network, compute=str(entry["compute"]), comm=comm,
                          seq_len=entry.get("seq_len")))
    return cases


def select_cases(cases: Sequence[Case], names: Iterable[str] | None) -> list[Case]:
    """The cases named (all of them for None); an unknown name lists the known ones."""
    if not names:
        return list(cases)
    by = {c.name: c for c in cases}
    out = []
    for n in names:
        if n not in by:
            raise ConfigError(f"unknown case {n!r}; configured: {', '.join(by)}")
        out.append(by[n])
    return out


# --------------------------------------------------------------------------- plans
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


def ddp_label(cap: float | None) -> str:
    """``25.0`` -> ``ddp-native-25``; None (no ``bucket_cap_mb``) -> ``ddp-native-default``."""
    return "ddp-native-default" if cap is None else f"ddp-native-{cap:g}"


def make_case_plans(case: Case, settings: Settings,
                    interference: Mapping[str, float] | None = None) -> CasePlans:
    """Every algorithm's plan (from the committed traces), deduplicated into items.
    ``interference`` (``compute_slowdown``, ``comm_slowdown``, ``collective_cpu_s``) is
    given to the ``best`` planner's scoring replay, which also assumes the executor's
    fixed issue order (knobs set in the config win)."""
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.planners import make_plan, replay_knobs
    from gradsched.traces.bundle import ComputeTrace

    trace = ComputeTrace.load(case.compute)
    model = load_comm_spec(case.comm)
    plans: dict[str, Any] = {}
    item_of: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for algorithm in settings.algorithms:
        # planners that score by replay score what the executor will run
        knobs = replay_knobs(algorithm, {"issue": "executor", **(interference or {})}) | dict(
            settings.knobs.get(algorithm, {}))
        plan = make_plan(algorithm, trace, model, case.world_size, knobs)
        plan.check_covers(trace.names)
        plans[algorithm] = plan
        data = plan.to_dict()
        key = executor_key(data)
        if key not in seen:
            seen[key] = f"plan-{algorithm}"
            items.append({"key": f"plan-{algorithm}", "kind": "plan", "plan": data,
                          "bucket_cap_mb": None})
        item_of[algorithm] = seen[key]
    for cap in settings.ddp_bucket_cap_mb:
        label = ddp_label(cap)
        plans[label] = make_plan("ddp", trace, model, case.world_size, {"bucket_cap_mb": cap})
        items.append({"key": label, "kind": "ddp", "plan": None, "bucket_cap_mb": cap})
        item_of[label] = label
    items.append({"key": CONTROL, "kind": "control", "plan": None, "bucket_cap_mb": None})
    return CasePlans(plans=plans, item_of=item_of, items=items)


def round_order(n: int, r: int, seed: int) -> list[int]:
    """Item order of round ``r``: a permutation of ``range(n)`` drawn at random from
    ``(seed, r)`` (the same for every rank and every re-run with that seed), so that
    neither a drift of the machine nor the item before it biases an item in one
    direction."""
    return random.Random(f"reexec-order-{seed}-{r}").sample(range(n), n)


# --------------------------------------------------------------------------- rank side
def rounds_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Launcher task: every item of ``payload['items']`` in ``payload['rounds']`` rounds,
    in each round's random order; per item: the timed iterations, this rank's CPU time
    and the machine's busy time over the item (:mod:`gradsched.reexec.load`)."""
    import torch
    import torch.distributed as dist

    from gradsched.reexec.load import sample
    from gradsched.runtime.bench import RunItem, _timed
    from gradsched.workloads import build_model

    device = "cpu"
    if dist.get_backend() == "nccl":
        device = f"cuda:{torch.cuda.current_device()}"
    items = payload["items"]
    rounds = int(payload["rounds"])
    out = []
    for r in range(rounds):
        for position, index in enumerate(round_order(len(items), r, int(payload["seed"]))):
            raw = items[index]
            load = os.getloadavg()[0]
            started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            before = sample()
            spec = build_model(payload["model"], int(payload["batch_size"]), device=device,
                               seq_len=payload.get("seq_len"), seed=int(payload["seed"]))
            batches = [spec.make_batch() for _ in range(2)]
            if raw["kind"] == "control":
                times = _control(spec, batches, payload, device)
            else:
                item = RunItem(label=raw["key"], algorithm=raw["key"], plan=raw["plan"],
                               bucket_cap_mb=raw["bucket_cap_mb"])
                times, _ = _timed(rank, spec, batches, item, payload, device, raw["key"])
            after = sample()
            out.append({"round": r, "position": position, "item": index, "times": times,
                        "load": load, "started_at": started,
                        "cpu_s": after.own_cpu_s - before.own_cpu_s,
                        "busy": [before.machine_busy_s, after.machine_busy_s],
                        "wall": [before.at_s, after.at_s]})
            del spec, batches
    return {"rank": rank, "runs": out}


def _foreign(runs: Sequence[Mapping[str, Any]]) -> float:
    """Cores used by anything but the ranks during one item (rank 0's window; NaN where
    /proc/stat is unavailable)."""
    from gradsched.reexec.load import CpuSample, foreign_cores

    first = runs[0]
    start = CpuSample(first["busy"][0], 0.0, first["wall"][0])
    end = CpuSample(first["busy"][1], 0.0, first["wall"][1])
    value = foreign_cores(start, end, sum(float(r["cpu_s"]) for r in runs))
    return math.nan if value is None else value


def _control(spec: Any, batches: list[Any], payload: dict[str, Any], device: str) -> list[float]:
    """Forward, backward and SGD step with no communication (same timing as the runs)."""
    import torch

    from gradsched.runtime.bench import timed_iterations

    model = spec.model
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01,
                          momentum=0.9)

    def one(i: int) -> None:
        spec.loss(model, batches[i % len(batches)]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if device != "cpu":
            torch.cuda.synchronize()

    return timed_iterations(one, int(payload["warmup"]), int(payload["iters"]), sync)


# --------------------------------------------------------------------------- launcher side
def measure_case(case: Case, settings: Settings, case_plans: CasePlans) -> pd.DataFrame:
    """Launch the ranks for ``case`` and return one row per timed iteration."""
    from gradsched.distributed import LaunchSpec, launch

    payload = {"model": case.model, "batch_size": case.batch_size, "seq_len": case.seq_len,
               "seed": settings.seed, "items": case_plans.items, "rounds": settings.rounds,
               "warmup": settings.warmup, "iters": settings.iters,
               "timeout_s": settings.timeout_s, "profile_dir": None}
    n_runs = settings.rounds * len(case_plans.items)
    common = {"backend": settings.backend, "threads_per_rank": settings.threads,
              "op_timeout_s": settings.timeout_s,
              "deadline_s": max(3600.0, settings.timeout_s * n_runs)}
    task = "gradsched.reexec.experiment:rounds_task"
    if case.rate is not None:
        from gradsched.distributed.cluster import EmulatedCluster

        with EmulatedCluster(case.world_size, case.rate) as emu:
            results = launch(task, payload, emu.launch_spec(**common))
    else:
        results = launch(task, payload, LaunchSpec(case.world_size, **common))
    rows = []
    for k, run in enumerate(results[0]["runs"]):
        per_rank = [r["runs"][k]["times"] for r in results]
        times = [max(ts) for ts in zip(*per_rank, strict=True)]
        foreign = _foreign([r["runs"][k] for r in results])
        item = case_plans.items[run["item"]]
        for i, t in enumerate(times):
            rows.append({"case": case.name, "model": case.model, "batch_size": case.batch_size,
                         "world_size": case.world_size, "network": case.network,
                         "item": item["key"], "kind": item["kind"], "round": run["round"],
                         "position": run["position"], "iteration": i, "iteration_s": t,
                         "load_avg_1m": run["load"], "foreign_cpu_cores": foreign,
                         "started_at": run["started_at"]})
    return pd.DataFrame(rows, columns=list(ITERATION_COLUMNS))


def run_case(case: Case, settings: Settings, out_dir: str | Path,
             interference: InterferenceSpec = None) -> Path:
    """Plan, measure and save one case under ``out_dir/<case>/`` (iterations.csv, plans/,
    meta.json). ``interference``: the calibrated interference JSON(s) that the ``best``
    planner scores with (see :func:`make_case_plans`). Returns the case folder."""
    folder = Path(out_dir) / case.name
    inter_path = interference_for(interference, case.network, case.world_size)
    params, _ = load_interference(inter_path)
    case_plans = make_case_plans(case, settings, params if inter_path else None)
    for label, plan in case_plans.plans.items():
        plan.save(folder / "plans" / f"{label}.plan.json")
    busy_before = _check_quiet(case, settings)
    load_before = os.getloadavg()
    start = time.monotonic()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    frame = measure_case(case, settings, case_plans)
    wall = time.monotonic() - start
    write_csv_atomic(folder / "iterations.csv", frame)
    meta = {"case": asdict(case), "settings": settings.to_dict(), "started_at": started,
            "wall_s": round(wall, 1), "load_average_before": list(load_before),
            "busy_cores_before": busy_before,
            "load_average_after": list(os.getloadavg()), "machine": machine_versions(),
            "item_of": case_plans.item_of,
            "planning_interference": ({"file": str(inter_path)} | params
                                      if inter_path else None),
            "items": [{k: v for k, v in it.items() if k != "plan"} for it in case_plans.items],
            "method": "gradsched reexec run: one launch per case; rounds x items (a seeded "
                      "random order per round); each item builds the model (seed fixed), "
                      "runs warmup untimed + iters timed iterations; iteration = period "
                      "between starts of consecutive iterations, max over ranks "
                      "(gradsched.runtime.bench timing)"}
    write_json_atomic(folder / "meta.json", meta)
    return folder


class MachineBusyError(ConfigError):
    """Something else uses the machine: a measurement now would not be the plans' own."""


def _check_quiet(case: Case, settings: Settings) -> float | None:
    """Cores busy on the machine just before ``case`` starts; refuse to start at or above
    :data:`~gradsched.reexec.load.FOREIGN_LIMIT_CORES` unless ``allow_load``."""
    from gradsched.reexec.load import FOREIGN_LIMIT_CORES, busy_cores

    busy = busy_cores(2.0)
    if busy is not None and busy >= FOREIGN_LIMIT_CORES and not settings.allow_load:
        raise MachineBusyError(
            f"reexec: {busy:.2f} CPU cores are busy before case {case.name} starts (limit "
            f"{FOREIGN_LIMIT_CORES:g}): other work would slow the plans unevenly. Stop it "
            "and re-run, or pass --allow-load to measure anyway (the items are flagged)")
    return None if busy is None else round(busy, 3)


# --------------------------------------------------------------------------- predictions
def scaled_trace(trace: Any, scale: float) -> Any:
    """``trace`` with every compute time (forward, backward, update, their p10/p90)
    multiplied by ``scale``."""
    from gradsched.traces.bundle import ComputeTrace

    if scale <= 0:
        raise ConfigError(f"compute scale must be > 0, got {scale}")
    frame = trace.frame.copy()
    for col in frame.columns:
        if col.endswith("_s") and col.split("_")[0] in ("forward", "backward", "update"):
            frame[col] = frame[col] * scale
    out = ComputeTrace.from_frame(frame, trace.meta)
    out.path = trace.path
    return out


def trace_compute_s(trace: Any) -> float:
    """Sum of the trace's forward, backward and update times (the replay's compute)."""
    return float(trace.forward_total_s + trace.backward_total_s + trace.update_total_s)


INTERFERENCE_FIELDS: tuple[str, ...] = ("compute_slowdown", "comm_slowdown",
                                       "collective_cpu_s")
NO_INTERFERENCE: dict[str, float] = {"compute_slowdown": 1.0, "comm_slowdown": 1.0,
                                     "collective_cpu_s": 0.0}


def load_interference(path: str | Path | None) -> tuple[dict[str, float], dict[str, Any]]:
    """``(parameters, json)`` from an interference JSON: the replay's ``compute_slowdown``,
    ``comm_slowdown`` and ``collective_cpu_s`` (none: 1, 1, 0 s; a JSON from before
    ``collective_cpu_s`` was measured has 0 s)."""
    if path is None:
        return dict(NO_INTERFERENCE), {}
    data = read_json(path, missing="interference JSON not found")
    params: dict[str, float] = {}
    for name in INTERFERENCE_FIELDS:
        value = data.get(name, 0.0 if name == "collective_cpu_s" else None)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise InputError(f"needs a number, got {value!r}", path=path, field=name)
        params[name] = float(value)
    _check_interference(params, path)
    return params, data


def _check_interference(params: dict[str, float], path: str | Path) -> None:
    """Refuse values outside the replay's ranges instead of clamping them (issue 17): a
    slowdown below 1 or a negative cost means a broken calibration, not "no effect"."""
    from gradsched.limits import MAX_SECONDS, in_range
    from gradsched.replay.engine import MAX_SLOWDOWN

    for name in ("compute_slowdown", "comm_slowdown"):
        if not in_range(params[name], 1.0, MAX_SLOWDOWN):
            raise InputError(f"{params[name]!r} is out of range [1, {MAX_SLOWDOWN:g}] "
                             "(1 = no interference)", path=path, field=name)
    if not in_range(params["collective_cpu_s"], 0.0, MAX_SECONDS):
        raise InputError(f"{params['collective_cpu_s']!r} is out of range [0, "
                         f"{MAX_SECONDS:g}] seconds (0 = no interference)", path=path,
                         field="collective_cpu_s")


def _foreign_stats(times: pd.DataFrame) -> dict[str, float | int]:
    """The most foreign CPU seen during an item's runs, and how many of its runs were at
    or above the limit (data from before the column existed: NaN and 0)."""
    from gradsched.reexec.load import FOREIGN_LIMIT_CORES

    if "foreign_cpu_cores" not in times:
        return {"foreign_cpu_cores_max": math.nan, "n_flagged_runs": 0}
    per_run = times.groupby("round")["foreign_cpu_cores"].first()
    return {"foreign_cpu_cores_max": float(per_run.max()),
            "n_flagged_runs": int((per_run >= FOREIGN_LIMIT_CORES).sum())}


def _stats(values: list[float]) -> dict[str, float]:
    from gradsched.runtime.bench import percentile

    return {"measured_s": statistics.median(values), "measured_p10_s": percentile(values, 10),
            "measured_p90_s": percentile(values, 90),
            "measured_mean_s": statistics.fmean(values)}


InterferenceSpec = str | Path | Mapping[str, str | Path] | None


def interference_for(spec: InterferenceSpec, network: str,
                     world_size: int | None = None) -> str | Path | None:
    """The interference JSON of ``network`` at ``world_size``: ``spec`` itself, or the
    first of ``spec["<network>-p<world_size>"]``, ``spec[network]``, any
    ``spec["<network>-p<N>"]`` (smallest N), ``spec["*"]`` (None: no interference)."""
    if spec is None or isinstance(spec, str | Path):
        return spec
    if world_size is not None and f"{network}-p{world_size}" in spec:
        return spec[f"{network}-p{world_size}"]
    if network in spec:
        return spec[network]
    same = sorted((int(k.rsplit("-p", 1)[1]), v) for k, v in spec.items()
                  if k.startswith(f"{network}-p"))
    return same[0][1] if same else spec.get("*")


_INTERFERENCE_KEY = re.compile(r"^(?P<net>[a-z0-9]+)(?:-p(?P<p>[1-9][0-9]*))?$")


def parse_interference_args(values: Sequence[str]) -> InterferenceSpec:
    """``["PATH"]`` or ``["tbf100mbit=PATH", "tbf100mbit-p3=PATH", "*=PATH", ...]`` ->
    a spec (a key names a network, optionally at one world size)."""
    if not values:
        return None
    out: dict[str, str] = {}
    for value in values:
        key, sep, path = value.partition("=")
        if not sep:
            key, path = "*", value
        match = _INTERFERENCE_KEY.match(key)
        if key != "*" and (match is None or match.group("net") not in NETWORKS):
            raise ConfigError(f"--interference {value!r}: the key must be a network "
                              f"({', '.join(sorted(NETWORKS))}), optionally with -p<ranks> "
                              "(e.g. tbf1gbit-p3), or *")
        out[key] = path
    return out


def collect_case(folder: str | Path, interference: InterferenceSpec = None) -> pd.DataFrame:
    """One row per algorithm (and DDP cap, and the control) of a measured case folder."""
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.plan import Plan
    from gradsched.replay.engine import ReplayOptions, replay
    from gradsched.traces.bundle import ComputeTrace

    folder = Path(folder)
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        raise InputError("no meta.json: not a measured case folder", path=folder)
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    case = Case(**meta["case"])
    settings = parse_settings(meta["settings"], meta_file)
    frame = pd.read_csv(folder / "iterations.csv")
    control = frame.loc[frame["item"] == CONTROL, "iteration_s"].tolist()
    if not control:
        raise InputError("no compute-only control iterations", path=folder / "iterations.csv")
    trace = ComputeTrace.load(case.compute)
    model = load_comm_spec(case.comm)
    scale = statistics.median(control) / trace_compute_s(trace)
    scaled = scaled_trace(trace, scale)
    inter_path = interference_for(interference, case.network, case.world_size)
    params, _ = load_interference(inter_path)
    plain = ReplayOptions(iterations=settings.replay_iterations, issue="executor")
    inter = ReplayOptions(iterations=settings.replay_iterations, issue="executor", **params)
    dynamic = ReplayOptions(iterations=settings.replay_iterations, issue="dynamic", **params)
    # the lower bound of any plan on the scaled trace (replay/bounds.py; no interference):
    # how much faster than a baseline any schedule could be under the model
    from gradsched.replay.bounds import lower_bound

    bound = lower_bound(scaled, model, case.world_size).lower_bound_s
    rows = []
    base = {"case": case.name, "model": case.model, "batch_size": case.batch_size,
            "world_size": case.world_size, "bandwidth": case.network}
    for label, item in meta["item_of"].items():
        plan = Plan.load(folder / "plans" / f"{label}.plan.json")
        times = frame.loc[frame["item"] == item]
        if times.empty:
            raise InputError(f"no measured iterations for item {item!r}",
                             path=folder / "iterations.csv")
        raw = replay(trace, plan, model, case.world_size, plain)
        rows.append(base | {
            "algorithm": label, "kind": "ddp-native" if label.startswith("ddp-native")
            else "plan", "item": item, "n_buckets": raw.n_buckets,
            "n_collectives": raw.n_collectives, "update": plan.update,
            "predicted_raw_s": raw.iteration_s, "compute_scale": scale,
            "predicted_s": replay(scaled, plan, model, case.world_size, plain).iteration_s,
            "predicted_interference_s": replay(scaled, plan, model, case.world_size,
                                               inter).iteration_s,
            "predicted_dynamic_s": replay(scaled, plan, model, case.world_size,
                                          dynamic).iteration_s,
            **params, **_stats(times["iteration_s"].tolist()), "iters": len(times),
            "rounds": int(times["round"].nunique()),
            "load_avg": float(times.groupby("round")["load_avg_1m"].first().mean()),
            "load_avg_min": float(times["load_avg_1m"].min()),
            "load_avg_max": float(times["load_avg_1m"].max()), **_foreign_stats(times),
            "bound_s": bound})
    ctrl = frame.loc[frame["item"] == CONTROL]
    rows.append(base | {
        "algorithm": CONTROL, "kind": "control", "item": CONTROL, "n_buckets": 0,
        "n_collectives": 0, "update": "global", "predicted_raw_s": trace_compute_s(trace),
        "compute_scale": scale, "predicted_s": trace_compute_s(scaled),
        "predicted_interference_s": trace_compute_s(scaled),
        "predicted_dynamic_s": trace_compute_s(scaled), **params,
        **_stats(ctrl["iteration_s"].tolist()), "iters": len(ctrl),
        "rounds": int(ctrl["round"].nunique()),
        "load_avg": float(ctrl.groupby("round")["load_avg_1m"].first().mean()),
        "load_avg_min": float(ctrl["load_avg_1m"].min()),
        "load_avg_max": float(ctrl["load_avg_1m"].max()), **_foreign_stats(ctrl),
        "bound_s": bound})
    return pd.DataFrame(rows, columns=list(MEASURED_COLUMNS))


def collect(folders: Sequence[str | Path], interference: InterferenceSpec,
            output: str | Path, iterations_output: str | Path | None = None,
            settings_output: str | Path | None = None) -> pd.DataFrame:
    """Predictions + measurements of every case folder -> ``output`` (measured.csv); also
    the concatenated per-iteration rows and a provenance JSON when asked."""
    if not folders:
        raise ConfigError("no case folders given")
    frames = [collect_case(f, interference) for f in folders]
    table = pd.concat(frames, ignore_index=True)
    write_csv_atomic(output, table)
    if iterations_output is not None:
        its = pd.concat([pd.read_csv(Path(f) / "iterations.csv") for f in folders],
                        ignore_index=True)
        write_csv_atomic(iterations_output, its)
    if settings_output is not None:
        metas = {}
        for f in folders:
            meta = json.loads((Path(f) / "meta.json").read_text(encoding="utf-8"))
            metas[meta["case"]["name"]] = meta
        inter = {}
        for net, world in sorted({(m["case"]["network"], m["case"]["world_size"])
                                  for m in metas.values()}):
            path = interference_for(interference, net, world)
            if path is not None:
                data = load_interference(path)[1]
                inter[f"{net}-p{world}"] = {"file": str(path)} | {
                    k: v for k, v in data.items() if k != "raw"}
        write_json_atomic(settings_output, {
            "kind": "reexec-provenance",
            "description": "Re-execution of every planner's plan with gradsched's executor "
                           "(and PyTorch DDP itself) vs the replay's prediction; see "
                           "gradsched.reexec.experiment for the method",
            "columns": {
                "predicted_raw_s": "replay of the committed compute trace as it is (CPU "
                                   "thread time of one uncontended rank)",
                "compute_scale": "median compute-only control (same launch, no "
                                 "communication) / the trace's compute sum",
                "predicted_s": "replay on the trace scaled by compute_scale, with the "
                               "executor's fixed issue order",
                "predicted_interference_s": "the same with the interference of "
                                            "interference.json: collective_cpu_s, "
                                            "compute_slowdown, comm_slowdown",
                "predicted_dynamic_s": "with interference, but the algorithms' dynamic "
                                       "issue order (what a scheduler free to reorder "
                                       "collectives would do)",
                "measured_s": "median iteration over all rounds (period between starts "
                              "of iterations, max over ranks)",
                "load_avg": "mean over rounds of the 1-minute load average read before the "
                            "item ran; load_avg_min/max over its runs"},
            "interference": inter, "cases": metas})
    return table
