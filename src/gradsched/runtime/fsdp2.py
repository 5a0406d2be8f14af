"""A :class:`~gradsched.plan_sharded.ShardedPlan` run by stock PyTorch FSDP2, and its timed
iterations.

:func:`apply_plan` turns the plan into ``fully_shard`` calls, which is what a user pastes:

* each unit: ``fully_shard([modules...], reshard_after_forward=...)`` over the modules that
  own its tensors (FSDP2 accepts a list of modules as one unit, one all-gather and one
  reduce-scatter for all of them; ``torch/distributed/fsdp/_fully_shard/_fully_shard.py``);
  a module whose parameters the plan splits between units is refused;
* the root: ``fully_shard(model)`` (every parameter of no unit);
* prefetch: ``unit_k.set_modules_to_forward_prefetch([units k+1..k+d_f])`` and
  ``unit_k.set_modules_to_backward_prefetch([units k-1..k-d_b])`` on the unit's first
  module. FSDP2 prefetches one unit in backward whenever no explicit list is set
  (``FSDPState._pre_backward``: ``default_prefetch = len(...) == 0``), so a backward depth of
  0 cannot be expressed and is refused.

:func:`run_plans` also runs, on request, the *compute-only control* of the re-execution
protocol: the same model, batches and optimizer on every rank at once, without
``fully_shard`` and without any collective, in the same rounds and random order as the
plans. Its time is what the ranks' compute takes on this machine at this moment, against
which the compute trace is scaled before predicting (:mod:`gradsched.reexec.predict`).

:func:`measure_plans` also measures, on request, each run's peak of allocated CPU memory in
one extra, untimed iteration (:mod:`gradsched.runtime.cpu_memory`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from gradsched.distributed import LaunchSpec, launch
from gradsched.distributed.cluster import EmulatedCluster
from gradsched.errors import ConfigError, InputError
from gradsched.plan_sharded import ShardedPlan, covering_modules
from gradsched.run_order import run_order
from gradsched.runtime.bench import timed_iterations
from gradsched.runtime.cpu_memory import iteration_peak_bytes
from gradsched.workloads import build_model

COMPUTE_ONLY: Literal["compute-only"] = "compute-only"
"""The item of :func:`run_plans` that runs the model without FSDP2 and communication."""


def unit_modules(model: nn.Module, plan: ShardedPlan) -> list[list[nn.Module]]:
    """The modules owning each unit's tensors, checked to hold no tensor of another unit."""
    modules = dict(model.named_modules())
    params = {n for n, p in model.named_parameters() if p.requires_grad}
    owner_of: dict[str, int] = {}
    out: list[list[nn.Module]] = []
    for k, unit in enumerate(plan.units):
        names: list[str] = []
        for tensor in unit.tensors:
            if tensor not in params:
                raise InputError(f"sharded plan '{plan.algorithm}': unit {k} names {tensor!r}, "
                                 "which is not a trainable parameter of the model",
                                 field="tensors")
            name = tensor.rsplit(".", 1)[0] if "." in tensor else ""
            if owner_of.setdefault(name, k) != k:
                raise InputError(f"module {name!r} has parameters in units {owner_of[name]} "
                                 f"and {k}; FSDP2 shards whole modules", field="tensors")
            if name not in names:
                names.append(name)
        out.append([modules[n] for n in covering_modules(unit.tensors, sorted(params))])
    for name, k in owner_of.items():
        own = {f"{name}.{p}" if name else p for p, q in modules[name].named_parameters(
            recurse=False) if q.requires_grad}
        missing = sorted(own - set(plan.units[k].tensors))
        if missing:
            raise InputError(f"unit {k} holds part of module {name!r} (not {missing[0]!r}); "
                             "FSDP2 shards whole modules", field="tensors")
    return out


def apply_plan(model: nn.Module, plan: ShardedPlan) -> list[list[nn.Module]]:
    """Shard ``model`` in place as ``plan`` says (module docstring); returns each unit's
    modules."""
    from torch.distributed.fsdp import fully_shard

    if plan.backward_prefetch < 1 and plan.n_units > 1:
        raise ConfigError("FSDP2 always prefetches one unit in backward; a backward_prefetch "
                          "of 0 cannot be run")
    units = unit_modules(model, plan)
    for modules, unit in zip(units, plan.units, strict=True):
        fully_shard(modules, reshard_after_forward=unit.reshard_after_forward)
    fully_shard(model)
    for k, modules in enumerate(units):
        ahead = [units[j][0] for j in range(k + 1, min(k + plan.forward_prefetch, len(units) - 1)
                                            + 1)]
        if ahead:
            modules[0].set_modules_to_forward_prefetch(ahead)
        behind = [units[j][0] for j in range(k - 1, max(k - plan.backward_prefetch, 0) - 1, -1)]
        if behind:
            modules[0].set_modules_to_backward_prefetch(behind)
    return units


def sharded_groups(units: list[list[nn.Module]]) -> list[list[str]]:
    """The parameter names FSDP2 itself groups in each unit (its ``FSDPParam`` fully
    qualified names), to check that the run grouped what the plan says."""
    out = []
    for modules in units:
        group = modules[0]._get_fsdp_state()._fsdp_param_group
        out.append(sorted(p._param_fqn for p in group.fsdp_params) if group else [])
    return out


def timed_plans(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Launcher task: for each item of ``payload['plans']`` (a plan's JSON dict, or
    :data:`COMPUTE_ONLY`), a fresh model (sharded by FSDP2 as the plan says; untouched for
    the control), ``warmup`` untimed and ``iters`` timed iterations (SGD with momentum);
    per-iteration periods and the units FSDP2 formed; with ``payload['memory']``, one more
    iteration's peak of allocated CPU memory (:mod:`gradsched.runtime.cpu_memory`)."""
    out: dict[str, Any] = {"rank": rank, "runs": []}
    for raw in payload["plans"]:
        spec = build_model(payload["model"], int(payload["batch_size"]),
                           seq_len=payload.get("seq_len"), seed=int(payload.get("seed", 0)))
        if raw == COMPUTE_ONLY:
            algorithm, units = COMPUTE_ONLY, []
        else:
            plan = ShardedPlan.from_dict(raw)
            algorithm, units = plan.algorithm, apply_plan(spec.model, plan)
        opt = torch.optim.SGD(spec.model.parameters(), lr=0.01, momentum=0.9)
        batches = [spec.make_batch() for _ in range(2)]

        def one(i: int, spec: Any = spec, opt: Any = opt, batches: list[Any] = batches) -> None:
            spec.loss(spec.model, batches[i % len(batches)]).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        warmup, iters = int(payload["warmup"]), int(payload["iters"])
        times = timed_iterations(one, warmup, iters, lambda: None)
        peak = iteration_peak_bytes(functools.partial(one, warmup + iters)) \
            if payload.get("memory") else None
        out["runs"].append({"algorithm": algorithm, "times_s": times,
                            "unit_tensors": sharded_groups(units), "peak_bytes": peak})
    return out


@dataclass(frozen=True)
class PlanRuns:
    """Per item of :func:`measure_plans`: every timed iteration (the slowest rank's period)
    pooled over rounds, the parameter names FSDP2 grouped in each unit (rank 0, first run;
    none for the control) and, when measured, the peak of CPU memory allocated during one
    extra iteration (:mod:`gradsched.runtime.cpu_memory`), the largest over ranks and
    rounds (``None`` when not measured)."""

    times_s: list[list[float]]
    groups: list[list[list[str]]]
    peak_bytes: list[int | None]


def run_plans(plans: Sequence[ShardedPlan | Literal["compute-only"]], *, model: str,
              batch_size: int, world_size: int,
              rounds: int = 3, iters: int = 5, warmup: int = 1, threads: int = 1,
              cluster: str | None = None, seq_len: int | None = None, seed: int = 0,
              timeout_s: float = 300.0) -> tuple[list[list[float]], list[list[list[str]]]]:
    """:func:`measure_plans` without memory: per item, the pooled timed iterations and the
    units FSDP2 formed."""
    runs = measure_plans(plans, model=model, batch_size=batch_size, world_size=world_size,
                         rounds=rounds, iters=iters, warmup=warmup, threads=threads,
                         cluster=cluster, seq_len=seq_len, seed=seed, timeout_s=timeout_s)
    return runs.times_s, runs.groups


def measure_plans(plans: Sequence[ShardedPlan | Literal["compute-only"]], *, model: str,
                  batch_size: int, world_size: int, rounds: int = 3, iters: int = 5,
                  warmup: int = 1, threads: int = 1, cluster: str | None = None,
                  seq_len: int | None = None, seed: int = 0, timeout_s: float = 300.0,
                  memory: bool = False) -> PlanRuns:
    """Launch the ranks (loopback, or the emulated cluster at ``cluster``'s rate) and run
    every plan (or :data:`COMPUTE_ONLY`, the control) ``rounds`` times in interleaved random
    order (:class:`PlanRuns`); ``memory``: one more, profiled iteration after each run's
    timed ones."""
    if not plans:
        raise ConfigError("nothing to run: give at least one sharded plan")
    if iters < 1 or warmup < 1 or rounds < 1:
        raise ConfigError("--iters, --warmup and --rounds must be >= 1 (FSDP2's first "
                          "iteration initialises lazily)")
    order = run_order(len(plans), rounds, seed)
    payload = {"model": model, "batch_size": batch_size, "seq_len": seq_len, "seed": seed,
               "plans": [_item(plans[k]) for k in order], "warmup": warmup, "iters": iters,
               "timeout_s": timeout_s, "memory": memory}
    common = {"backend": "gloo", "threads_per_rank": threads, "op_timeout_s": timeout_s,
              "deadline_s": max(600.0, timeout_s * 2)}
    task = "gradsched.runtime.fsdp2:timed_plans"
    if cluster is not None:
        with EmulatedCluster(world_size, cluster) as emu:
            results = launch(task, payload, emu.launch_spec(**common))
    else:
        results = launch(task, payload, LaunchSpec(world_size, **common))
    pooled: list[list[float]] = [[] for _ in plans]
    groups: list[list[list[str]]] = [[] for _ in plans]
    peaks: list[int | None] = [None for _ in plans]
    for position, k in enumerate(order):
        per_rank = [r["runs"][position]["times_s"] for r in results]
        pooled[k] += [max(ts) for ts in zip(*per_rank, strict=True)]
        groups[k] = groups[k] or results[0]["runs"][position]["unit_tensors"]
        if memory:
            peak = max(int(r["runs"][position]["peak_bytes"]) for r in results)
            peaks[k] = max(peaks[k] or 0, peak)
    return PlanRuns(pooled, groups, peaks)


def _item(plan: ShardedPlan | Literal["compute-only"]) -> dict[str, Any] | str:
    return COMPUTE_ONLY if isinstance(plan, str) else plan.to_dict()
