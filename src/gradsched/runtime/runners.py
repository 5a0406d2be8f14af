"""How one item of the timing protocol (:mod:`gradsched.runtime.rounds`) trains on a rank.

Every kind trains the same freshly built model with SGD (lr 0.01, momentum 0.9) on the
same synthetic batches; what differs is who moves the gradients:

* ``plan``: gradsched's :class:`~gradsched.runtime.executor.PlanExecutor` runs an
  all-reduce (or parameter-server) plan; reported: the collectives of one iteration;
* ``ddp`` / ``ddp-list``: stock PyTorch DDP (Li et al., VLDB 2020) with one
  ``bucket_cap_mb`` or a per-bucket ``bucket_cap_mb_list`` (torch >= 2.14). DDP rebuilds
  its buckets in the gradient order of the first iteration, in the second forward
  (``torch/nn/parallel/distributed.py``, ``_pre_forward``: ``reducer._rebuild_buckets()``),
  so a list needs a warm-up; reported: the buckets DDP rebuilt
  (``_get_ddp_logging_data()["rebuilt_per_bucket_param_indices"]``, as parameter names);
* ``fsdp2``: stock FSDP2 sharded as a :class:`~gradsched.plan_sharded.ShardedPlan` says
  (:func:`gradsched.runtime.fsdp2.apply_plan`); reported: the units FSDP2 formed;
* ``zero1``: stock DDP at its default caps with torch's ``ZeroRedundancyOptimizer`` (SGD
  as above) in place of SGD; with the plan's ``optimizer = "bucket_owner"``
  (:mod:`gradsched.planners.zero1_torch`, ``overlap_with_ddp``) the optimizer steps inside
  DDP's comm hook (:func:`gradsched.runtime.zero1.overlap_hook`), and the runner first runs
  the :data:`~gradsched.runtime.zero1.WARMUP` iterations in which that hook steps nothing
  (untimed, while the runner is built), so that every iteration the protocol runs is a
  full step; reported: nothing;
* ``control``: the *compute-only control*: forward, backward and SGD step with no
  communication at all.

**Gradient accumulation** (``context.grad_accum`` = ``k``, default 1): one iteration is
one optimizer step of ``k`` micro-batches (the batches cycled), each loss scaled by
``1 / k`` so that the step's gradient is the mean over its ``k`` micro-batches (with
equal micro-batches and a mean loss: the gradient of the concatenated batch). The first
``k - 1`` backward passes run without communication: the executor's
:meth:`~gradsched.runtime.executor.PlanExecutor.no_sync`, stock DDP's ``no_sync()``
(``torch/nn/parallel/distributed.py``: ``require_backward_grad_sync`` false, so the reducer
is not prepared and its hooks only accumulate), FSDP2's
``set_requires_gradient_sync(False)`` (all-gathers still run, reduce-scatters do not;
with the plan's ``keep_unsharded_between_microbatches`` also
``set_reshard_after_backward(False)``, so that only the first micro-batch all-gathers in
forward; :mod:`gradsched.replay.sharded`); the ``k``-th communicates; then the update. ``k = 1``
runs exactly as before (no scaling, no context). ZeRO-1 accumulates under DDP's
``no_sync()`` as stock DDP does and steps once per step: ``step()`` after the last backward,
or with ``overlap_with_ddp`` inside the last backward's comm hook, since DDP prepares the
reducer, whose buckets call the hook, only outside ``no_sync()`` (torch 2.14,
``torch/nn/parallel/distributed.py`` L1829-1838, ``_post_forward``:
``prepare_for_backward`` only when ``require_backward_grad_sync``): ``hook_with_zero_step``
(``ddp_zero_hook.py`` L253-338) sees one backward per step, so its
:data:`~gradsched.runtime.zero1.WARMUP` counts steps, not micro-batches (checked on 2 gloo
ranks by :mod:`gradsched.runtime.accum_check`: the third step of ``k`` micro-batches
updates, by ``-lr`` times the concatenated batch's gradient).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.plan_sharded import ShardedPlan
from gradsched.runtime.executor import PlanExecutor, Reduction
from gradsched.runtime.fsdp2 import apply_plan, sharded_groups
from gradsched.runtime.ps import PSClient, bench_server, partition_schedule
from gradsched.runtime.zero1 import WARMUP as ZERO1_WARMUP
from gradsched.runtime.zero1 import overlap_hook


@dataclass
class Runner:
    """One item ready to time on this rank: ``one(i)`` runs iteration ``i``; ``settle()``
    finishes pending work (the executor's flush, the device's queue); ``report()`` is what
    the item says after its timed iterations; ``close()`` releases it."""

    one: Callable[[int], None]
    settle: Callable[[], None]
    report: Callable[[], dict[str, Any]] = field(default=lambda: {})
    close: Callable[[], None] = field(default=lambda: None)


def buckets_match(rebuilt: list[list[str]] | None,
                  expected: list[list[str]] | None) -> bool | None:
    """Whether DDP rebuilt the expected buckets (same buckets in the same order; the order
    of tensors inside a bucket is DDP's own); None when either is unknown."""
    if rebuilt is None or expected is None:
        return None
    return [sorted(b) for b in rebuilt] == [sorted(b) for b in expected]


def parse_bucket_indices(text: str, names: list[str]) -> list[list[str]]:
    """``"3 2, 1 0"`` (DDP's ``rebuilt_per_bucket_param_indices``: buckets separated by
    commas, indices into the trainable parameters by spaces) -> names per bucket."""
    return [[names[int(i)] for i in part.split()] for part in text.split(",") if part.strip()]


def rebuilt_buckets(runner: Any, model: Any) -> list[list[str]]:
    """The buckets stock DDP rebuilt after the first iteration, as parameter names. The
    logger records them at the forward *after* the rebuild, so it is refreshed here first
    (outside any timing)."""
    runner.logger.set_runtime_stats_and_log()
    data = runner._get_ddp_logging_data()
    text = data.get("rebuilt_per_bucket_param_indices")
    if not runner._has_rebuilt_buckets or text is None:
        raise ConfigError("PyTorch DDP did not rebuild its buckets (a bucket_cap_mb_list "
                          "run needs --warmup >= 1)")
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    return parse_bucket_indices(str(text), names)


def trainable_numel(model: Any) -> dict[str, int]:
    """Trainable parameter names -> element counts."""
    return {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}


def sgd(model: Any) -> Any:
    """The optimizer of every item: SGD, lr 0.01, momentum 0.9, trainable parameters."""
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01,
                           momentum=0.9)


def device_sync(device: str) -> Callable[[], None]:
    """Wait for the device's queue (nothing to wait for on the CPU)."""
    def sync() -> None:
        if device != "cpu":
            torch.cuda.synchronize()
    return sync


Silence = Callable[[], contextlib.AbstractContextManager[Any]]
"""A context in which a backward pass communicates nothing (gradient accumulation)."""


class RunnerItem(Protocol):
    """What a runner reads of an item (:class:`gradsched.runtime.rounds.Item`)."""

    kind: str
    plan: dict[str, Any] | None
    bucket_cap_mb: float | None
    bucket_cap_mb_list: list[float] | None


@dataclass(frozen=True)
class RunContext:
    """What every runner of one timed run shares, made once per run from its
    :class:`~gradsched.runtime.rounds.Timing`: the collectives' timeout, the node layout
    of hierarchical buckets, the parameter-server layout (``ps``: (layout, workers' group),
    or None) and the micro-batches per step."""

    timeout_s: float
    ranks_per_node: int | None = None
    ps: tuple[Any, Any] | None = None
    grad_accum: int = 1


def make_runner(item: RunnerItem, spec: Any, batches: list[Any], device: str,
                context: RunContext) -> Runner:
    """The :class:`Runner` of ``item`` (module docstring) in ``context``."""
    kind, k = item.kind, context.grad_accum
    if kind == "plan":
        return _executor_runner(item, spec, batches, device, context)
    if kind in ("ddp", "ddp-list"):
        return _ddp_runner(item, spec, batches, device, k)
    if kind == "fsdp2":
        return _fsdp2_runner(item, spec, batches, device, k)
    if kind == "zero1":
        return _zero1_runner(item, spec, batches, device, k)
    if kind == "control":
        return _plain_runner(spec, spec.model, sgd(spec.model), batches, device, k)
    raise ConfigError(f"unknown item kind {kind!r}")


def accumulate(loss: Callable[[Any], Any], batches: list[Any], i: int, k: int,
               silence: Silence) -> None:
    """The backward passes of step ``i`` (module docstring): micro-batches ``i k .. i k +
    k - 1`` of ``batches`` (cycled), the first ``k - 1`` inside ``silence()``, each loss
    divided by ``k``; ``k = 1``: one plain backward of batch ``i``."""
    if k == 1:
        loss(batches[i % len(batches)]).backward()
        return
    for micro in range(k):
        batch = batches[(i * k + micro) % len(batches)]
        with silence() if micro < k - 1 else contextlib.nullcontext():
            (loss(batch) / k).backward()


@contextlib.contextmanager
def _no_context() -> Iterator[None]:
    yield


def _plain_runner(spec: Any, model: Any, opt: Any, batches: list[Any], device: str,
                  k: int = 1, silence: Silence = _no_context) -> Runner:
    def one(i: int) -> None:
        accumulate(lambda b: spec.loss(model, b), batches, i, k, silence)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Runner(one, device_sync(device))


def fsdp2_silence(model: Any, keep_unsharded: bool = False) -> Silence:
    """FSDP2's accumulation context: gradient sync off inside, back on after
    (``FSDPModule.set_requires_gradient_sync``, on every unit: ``recurse=True``); with
    ``keep_unsharded`` also ``set_reshard_after_backward(False)`` inside and true after
    (torch 2.14, ``torch/distributed/fsdp/_fully_shard/_fully_shard.py`` L490-511, every
    unit), so that the parameters gathered in a silent micro-batch stay gathered for the
    next one (:mod:`gradsched.replay.sharded`)."""
    @contextlib.contextmanager
    def silence() -> Iterator[None]:
        model.set_requires_gradient_sync(False)
        if keep_unsharded:
            model.set_reshard_after_backward(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
            if keep_unsharded:
                model.set_reshard_after_backward(True)
    return silence


def _executor_runner(item: RunnerItem, spec: Any, batches: list[Any], device: str,
                     context: RunContext) -> Runner:
    model, k = spec.model, context.grad_accum
    plan = Plan.from_dict(item.plan)  # type: ignore[arg-type]
    ex = PlanExecutor(model, plan, sgd(model), timeout_s=float(context.timeout_s),
                      **_executor_group(plan, model, context))
    sync = device_sync(device)

    def one(i: int) -> None:
        accumulate(lambda b: spec.loss(model, b), batches, i, k, ex.no_sync)
        ex.step()

    def settle() -> None:
        ex.flush()
        sync()

    return Runner(one, settle, lambda: {"n_collectives": sum(ex.stats.collectives.values())},
                  ex.close)


def _executor_group(plan: Plan, model: Any, context: RunContext) -> dict[str, Any]:
    """Executor arguments of a worker: the workers' group and the PS client (if any)."""
    ps = context.ps
    if ps is None:
        return {"reduction": Reduction(ranks_per_node=context.ranks_per_node)}
    layout, group = ps
    schedule = partition_schedule(plan, trainable_numel(model), layout.servers)
    return {"process_group": group,
            "reduction": Reduction(ps_client=PSClient(layout, schedule))}


def _ddp_runner(item: RunnerItem, spec: Any, batches: list[Any], device: str,
                k: int = 1) -> Runner:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = spec.model
    opt = sgd(model)
    caps = item.bucket_cap_mb_list
    extra = {"bucket_cap_mb_list": list(caps)} if caps else {}
    wrapped = DDP(model, bucket_cap_mb=item.bucket_cap_mb, **extra,
                  device_ids=[torch.device(device).index] if device != "cpu" else None)
    plain = _plain_runner(spec, wrapped, opt, batches, device, k, wrapped.no_sync)

    def report() -> dict[str, Any]:
        return {"rebuilt_buckets": rebuilt_buckets(wrapped, model) if caps else None}

    return Runner(plain.one, plain.settle, report)


def _zero1_runner(item: RunnerItem, spec: Any, batches: list[Any], device: str,
                  k: int = 1) -> Runner:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = spec.model
    overlap = Plan.from_dict(item.plan).optimizer == "bucket_owner"  # type: ignore[arg-type]
    wrapped = DDP(model, device_ids=[torch.device(device).index] if device != "cpu" else None)
    opt = ZeroRedundancyOptimizer([p for p in model.parameters() if p.requires_grad],
                                  optimizer_class=torch.optim.SGD, overlap_with_ddp=overlap,
                                  lr=0.01, momentum=0.9)
    if overlap:
        wrapped.register_comm_hook(None, overlap_hook(wrapped, opt))

    def one(i: int) -> None:
        accumulate(lambda b: spec.loss(wrapped, b), batches, i, k, wrapped.no_sync)
        if not overlap:  # with overlap the hook stepped during backward
            opt.step()
        wrapped.zero_grad(set_to_none=True)

    for i in range(ZERO1_WARMUP if overlap else 0):  # the hook's buckets become final
        one(i)
    return Runner(one, device_sync(device))


def _fsdp2_runner(item: RunnerItem, spec: Any, batches: list[Any], device: str,
                  k: int = 1) -> Runner:
    plan = ShardedPlan.from_dict(item.plan)  # type: ignore[arg-type]
    units = apply_plan(spec.model, plan)
    plain = _plain_runner(spec, spec.model, sgd(spec.model), batches, device, k,
                          fsdp2_silence(spec.model, plan.keep_unsharded_between_microbatches))
    return Runner(plain.one, plain.settle, lambda: {"unit_tensors": sharded_groups(units)})


def serve_item(layout: Any, model: Any, item: RunnerItem, warmup: int, iters: int,
               timeout_s: float) -> None:
    """A parameter server's side of one plan item (:func:`gradsched.runtime.ps.bench_server`):
    it times nothing."""
    bench_server(layout, Plan.from_dict(item.plan or {}), trainable_numel(model), warmup,
                 iters, dt.timedelta(seconds=timeout_s))
