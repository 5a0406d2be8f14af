"""``runtime.reference.ddp_bucket_plan`` builds the buckets real PyTorch DDP builds.

torch 2.14 (``torch/nn/parallel/distributed.py`` L86-110): the default cap is 25 MiB with
a 1 MiB first bucket; an explicit ``bucket_cap_mb`` is also the first bucket's cap. The
model below (four 1 MiB weights) makes the two rules give different first buckets.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = torch.distributed

from gradsched.errors import ConfigError  # noqa: E402
from gradsched.runtime.reference import (  # noqa: E402
    ddp_bucket_plan,
    loss_of,
    make_shard,
    make_test_model,
    ready_order,
)
from tests.runtime.test_executor import BATCH  # noqa: E402

MIB = 1024 * 1024


def _model() -> Any:
    """Four 512x512 linear layers: 1 MiB fp32 weights, 2 KiB biases."""
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)])


def _loss(module: Any, x: Any) -> Any:
    return module(x).sum()


def _real_buckets(module: Any, x: Any, **ddp_args: Any) -> list[set[str]]:
    """The reducer's buckets after two iterations (rebuilt after the first)."""
    names = {id(p): n for n, p in module.named_parameters()}
    ddp = torch.nn.parallel.DistributedDataParallel(module, **ddp_args)
    try:
        for _ in range(2):
            _loss(ddp, x).backward()
        return [{names[id(p)] for p in b.parameters()}
                for b in ddp.reducer._get_zeros_like_grad_buckets()]
    finally:
        del ddp
        module.zero_grad(set_to_none=True)
        gc.collect()


@pytest.mark.parametrize("cap", [None, 2.5, 25.0])
def test_ddp_bucket_plan_equals_real_ddp(gloo: None, cap: float | None) -> None:
    module = _model()
    x = torch.randn(2, 512)
    order = ready_order(module, lambda: _loss(module, x))
    planned = ddp_bucket_plan(module, order, cap)
    real = _real_buckets(module, x, bucket_cap_mb=cap)
    assert [set(b.tensors) for b in planned.buckets] == real


def test_explicit_cap_is_the_first_bucket_cap() -> None:
    module = _model()
    x = torch.randn(2, 512)
    order = ready_order(module, lambda: _loss(module, x))
    sizes = {n: p.numel() * 4 for n, p in module.named_parameters()}
    default = ddp_bucket_plan(module, order)
    explicit = ddp_bucket_plan(module, order, 2.5)
    # default: the first bucket closes at 1 MiB (last bias + last weight = 1 MiB + 2 KiB)
    assert sum(sizes[n] for n in default.buckets[0].tensors) < 2 * MIB
    assert default.info["first_bucket_bytes"] == MIB
    # explicit 2.5 MiB: the first bucket holds more than 2 MiB, like every other one
    assert sum(sizes[n] for n in explicit.buckets[0].tensors) > 2 * MIB
    assert explicit.info["first_bucket_bytes"] == explicit.info["bucket_cap_bytes"]
    assert explicit.knobs["first_bucket_mb"] == pytest.approx(2.5)
    # a first-bucket what-if still works
    what_if = ddp_bucket_plan(module, order, 2.5, first_bucket_mb=1.0)
    assert what_if.buckets[0].tensors == default.buckets[0].tensors


def test_bad_caps_are_refused() -> None:
    module = _model()
    order = [n for n, _ in module.named_parameters()][::-1]
    with pytest.raises(ConfigError, match="bucket_cap_mb"):
        ddp_bucket_plan(module, order, 0.0)
    with pytest.raises(ConfigError, match="first_bucket_mb"):
        ddp_bucket_plan(module, order, 1.0, first_bucket_mb=-1.0)


def test_ddp_bucket_plan_follows_ready_order_and_caps():
    from gradsched.runtime.reference import ddp_bucket_plan, ready_order

    model = make_test_model("mlp")
    x, y = make_shard(0, 0, 1, BATCH)
    order = ready_order(model, lambda: loss_of(model, x, y))
    assert order[0] == "fc3.bias" and set(order) == {n for n, _ in model.named_parameters()}
    assert all(p.grad is None for p in model.parameters())
    one = ddp_bucket_plan(model, order, bucket_cap_mb=25)
    assert [t for b in one.buckets for t in b.tensors] == order
    # a cap below every tensor's size: one bucket per tensor (the crossing tensor closes it)
    tiny = ddp_bucket_plan(model, order, bucket_cap_mb=1e-6, first_bucket_mb=1e-6)
    assert [b.tensors for b in tiny.buckets] == [(n,) for n in order]
