"""References for the executor's exactness checks, and DDP's own bucket plan.

* :func:`train_single` -- one process trains on the *full* batch (the concatenation of
  every rank's shard), the ground truth of synchronous data parallelism: the gradient of
  the mean loss over the full batch is the mean of the ranks' shard gradients. For models
  whose control flow depends on the data (a branch used by some samples only), the full
  batch is evaluated shard by shard (``per_shard=True``): loss = mean of the shard losses,
  the same gradient mathematically, and the same unused-parameter pattern as the ranks.
* :func:`train_ddp` -- PyTorch DistributedDataParallel itself (Li et al., "PyTorch
  Distributed", VLDB 2020) on this rank's shard, in an initialised process group.
* :func:`ddp_bucket_plan` -- the buckets DDP builds after its first iteration (its own
  ``_compute_bucket_assignment_by_size`` over tensors in gradient-ready order), as a
  :class:`~gradsched.plan.Plan`, so the executor can run exactly DDP's buckets.

The small test models live here too (:data:`TEST_MODELS`), each with a deterministic
shard generator ``make_shard(step, rank, world, batch)`` so that every process builds the
same data without communicating.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.planners.ddp import bucket_limits_bytes

MB = 1024 * 1024


class TinyMLP(nn.Module):
    """Three linear layers of uneven sizes (6 gradient tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 10)
        self.fc2 = nn.Linear(10, 12)
        self.fc3 = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class FrozenMLP(TinyMLP):
    """:class:`TinyMLP` with the first layer and the last bias frozen."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1.requires_grad_(False)
        self.fc3.bias.requires_grad_(False)


class BranchyNet(nn.Module):
    """A branch used only when the shard's first feature has a positive mean: some steps
    use it on every rank, some on none (no gradient anywhere), some on some ranks only."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(6, 10)
        self.branch = nn.Linear(10, 10)
        self.head = nn.Linear(10, 3)
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.trunk(x))
        if x[:, 0].mean() > 0:
            h = h + torch.tanh(self.branch(h))
        return self.head(h) * self.scale


TEST_MODELS: dict[str, type[nn.Module]] = {
    "mlp": TinyMLP, "frozen": FrozenMLP, "branchy": BranchyNet,
}
# Models whose forward depends on the data: the single-process reference runs shard by shard.
PER_SHARD = {"branchy"}


def make_test_model(name: str, seed: int = 0) -> nn.Module:
    """A test model with a seeded initialisation (the same on every process)."""
    if name not in TEST_MODELS:
        raise ConfigError(f"unknown test model {name!r}; known: {', '.join(TEST_MODELS)}")
    torch.manual_seed(seed)
    return TEST_MODELS[name]()


def make_shard(step: int, rank: int, world: int, batch: int, seed: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s shard of step ``step``: (inputs [batch, 6], targets [batch, 3]).

    Feature 0 is shifted so that, step by step (period 3): every shard has a positive mean
    (branch used everywhere), every shard negative (branch unused everywhere), only rank 0
    positive (branch used on some ranks only).
    """
    gen = torch.Generator().manual_seed(seed * 100_003 + step * 1009 + rank)
    x = torch.randn(batch, 6, generator=gen)
    y = torch.randn(batch, 3, generator=gen)
    phase = step % 3
    positive = phase == 0 or (phase == 2 and rank == 0)
    x[:, 0] = x[:, 0].abs() + 0.5 if positive else -x[:, 0].abs() - 0.5
    return x, y


def make_optimizer(name: str, params: Any) -> torch.optim.Optimizer:
    """``sgd`` (momentum 0.9, weight decay 1e-3) or ``adamw`` (weight decay 0.01)."""
    params = [p for p in params if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=0.01, weight_decay=0.01)
    raise ConfigError(f"unknown optimizer {name!r}; use sgd or adamw")


def loss_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(model(x), y)


def train_single(model_name: str, optimizer: str, world: int, steps: int, batch: int,
                 seed: int = 0) -> dict[str, torch.Tensor]:
    """Single-process training on the full batch; returns the final parameters."""
    model = make_test_model(model_name, seed)
    opt = make_optimizer(optimizer, model.parameters())
    per_shard = model_name in PER_SHARD
    for step in range(steps):
        shards = [make_shard(step, r, world, batch, seed) for r in range(world)]
        if per_shard:
            loss = sum(loss_of(model, x, y) for x, y in shards) / world
        else:
            x = torch.cat([s[0] for s in shards])
            y = torch.cat([s[1] for s in shards])
            loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def train_ddp(model_name: str, optimizer: str, rank: int, world: int, steps: int, batch: int,
              seed: int = 0, bucket_cap_mb: float = 25.0) -> dict[str, torch.Tensor]:
    """PyTorch DDP on this rank's shards (a process group must be initialised)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = make_test_model(model_name, seed)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb,
              find_unused_parameters=model_name in PER_SHARD)
    opt = make_optimizer(optimizer, model.parameters())
    for step in range(steps):
        x, y = make_shard(step, rank, world, batch, seed)
        loss_of(ddp, x, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def ready_order(model: nn.Module, loss_closure: Callable[[], torch.Tensor]) -> list[str]:
    """Names of the trainable parameters in the order their gradients became ready in one
    backward of ``loss_closure()`` (gradients are cleared afterwards)."""
    names = {p: n for n, p in model.named_parameters() if p.requires_grad}
    order: list[str] = []
    handles = [p.register_post_accumulate_grad_hook(lambda t: order.append(names[t]))
               for p in names]
    try:
        loss_closure().backward()
    finally:
        for h in handles:
            h.remove()
        for p in names:
            p.grad = None
    missing = [n for n in names.values() if n not in order]
    return order + missing[::-1]


def ddp_bucket_plan(model: nn.Module, order: list[str], bucket_cap_mb: float | None = None,
                    first_bucket_mb: float | None = None) -> Plan:
    """DDP's steady-state buckets: its own size rule over tensors in ready ``order``.

    The caps are torch 2.14's (``_BucketCapacityConfig.create``,
    ``torch/nn/parallel/distributed.py`` L86-110), computed by
    :func:`gradsched.planners.ddp.bucket_limits_bytes`: ``bucket_cap_mb=None`` is DDP's
    default (25 MiB with a 1 MiB first bucket, ``dist._DEFAULT_FIRST_BUCKET_BYTES``); an
    explicit ``bucket_cap_mb`` is also the first bucket's cap, as
    ``DistributedDataParallel(model, bucket_cap_mb=...)`` builds it. ``first_bucket_mb``
    overrides the first bucket's cap (a what-if, not a torch setting with an explicit cap).
    The buckets are torch's own ``_compute_bucket_assignment_by_size`` over ``order`` with
    limits ``[first, cap]`` (``Reducer::rebuild_buckets``).
    """
    import torch.distributed as dist

    if bucket_cap_mb is not None and not bucket_cap_mb > 0:
        raise ConfigError(f"bucket_cap_mb must be > 0, got {bucket_cap_mb}")
    if first_bucket_mb is not None and not first_bucket_mb > 0:
        raise ConfigError(f"first_bucket_mb must be > 0, got {first_bucket_mb}")
    first, cap = bucket_limits_bytes(bucket_cap_mb, first_bucket_mb)
    named = dict(model.named_parameters())
    tensors = [named[n] for n in order]
    indices = list(range(len(order)))
    groups, _ = dist._compute_bucket_assignment_by_size(
        tensors, [first, cap], [False] * len(tensors), indices)
    buckets = tuple(Bucket(tuple(order[i] for i in g)) for g in groups)
    return Plan(algorithm="ddp-native", buckets=buckets,
                knobs={"bucket_cap_mb": bucket_cap_mb, "first_bucket_mb": first / MB},
                info={"source": "torch.distributed._compute_bucket_assignment_by_size",
                      "first_bucket_bytes": first, "bucket_cap_bytes": cap})
