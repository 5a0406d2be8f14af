"""The ``ddp`` baseline against its original.

The planner's buckets equal the buckets a real ``DistributedDataParallel`` (torch
2.14, a 1-rank gloo group on CPU) holds after its first-iteration rebuild, for five real
models at bucket_cap_mb 1, 25, 100 and the default; and equal
``torch.distributed._compute_bucket_assignment_by_size`` (the C++ rule DDP calls) on
random sizes. The traces built here take parameter sizes and the ready order from the
real models; their TIMES are SYNTHETIC (bucket membership does not depend on them).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.planners import make_plan
from gradsched.planners._family import MB, fill_groups
from gradsched.planners.ddp import bucket_limits_bytes, rebuilt_ends
from gradsched.traces import ComputeTrace

META = {
    "kind": "compute", "model": "synthetic", "batch_size": 2, "device": "cpu", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23",
    "source": "SYNTHETIC times; sizes and ready order from a real torchvision/torch model",
}
CAPS: tuple[float | None, ...] = (None, 1.0, 25.0, 100.0)


def trace_from_rows(names: list[str], nbytes: list[int], ready: list[str],
                    backward_s: float = 1e-4) -> ComputeTrace:
    """Rows in the given (registration) order; ``ready`` = names in gradient-ready order;
    SYNTHETIC equal backward times."""
    position = {name: i for i, name in enumerate(ready)}
    frame = pd.DataFrame({
        "name": names,
        "layer": np.arange(len(names)),
        "numel": np.asarray(nbytes, dtype=np.int64) // 4,
        "bytes": np.asarray(nbytes, dtype=np.int64),
        "forward_s": 0.0,
        "backward_s": backward_s,
        "ready_order": [position[n] for n in names],
    })
    return ComputeTrace.from_frame(frame, META)


def plan_sets(plan: Any) -> list[set[str]]:
    return [set(b.tensors) for b in plan.buckets]


# -- DDP: torch's own bucket assignment ------------------------------------------------------
def test_first_bucket_rule_follows_distributed_py() -> None:
    """torch 2.14.1 nn/parallel/distributed.py L86-110: the 1 MiB first bucket only with
    the default cap; an explicit cap is also the first bucket's cap (int(cap * MiB))."""
    assert bucket_limits_bytes(None, None) == (MB, 25 * MB)
    assert bucket_limits_bytes(25.0, None) == (25 * MB, 25 * MB)
    assert bucket_limits_bytes(1.0, None) == (MB, MB)
    assert bucket_limits_bytes(0.3, None) == (int(0.3 * MB), int(0.3 * MB))
    assert bucket_limits_bytes(None, 2.0) == (2 * MB, 25 * MB)


def test_explicit_cap_changes_the_first_bucket() -> None:
    # SYNTHETIC sizes in ready order (MiB): [0.5, 0.75, 10, 10, 10, 30, 0.25, 0.5].
    # default: first cap 1 MiB -> {0,1}; then 25 MiB: 10+10+10 -> {2,3,4}; {5}; {6,7}.
    # cap 25: 0.5+0.75+10+10+10 = 31.25 >= 25 -> {0..4}; {5}; {6,7}.
    sizes = [int(m * MB) for m in [0.5, 0.75, 10, 10, 10, 30, 0.25, 0.5]]
    names = [f"t{i}" for i in range(len(sizes))]
    trace = trace_from_rows(names[::-1], sizes[::-1], names)
    model = AlphaBetaModel(1e-5, 1e-10)
    default = make_plan("ddp", trace, model, 8)
    assert [len(b.tensors) for b in default.buckets] == [2, 3, 1, 2]
    assert default.info["first_bucket_bytes"] == MB
    explicit = make_plan("ddp", trace, model, 8, {"bucket_cap_mb": "25"})
    assert [len(b.tensors) for b in explicit.buckets] == [5, 1, 2]
    assert explicit.info["first_bucket_bytes"] == 25 * MB
    # DDP_SET_LAST_BUCKET_CAP=1: fill from the last-ready tensor with the 1 MiB cap first:
    # 0.5, 0.25, 30 -> {5,6,7}; then 25 MiB: 10+10+10 -> {2,3,4}; {0,1} left over.
    last = make_plan("ddp", trace, model, 8, {"set_last_bucket_cap": "true"})
    assert [len(b.tensors) for b in last.buckets] == [2, 3, 3]


@pytest.fixture(scope="module")
def torch_mod() -> Any:
    return pytest.importorskip("torch")


def _models(torch: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    tv = pytest.importorskip("torchvision")

    def image() -> Any:
        return torch.randn(2, 3, 32, 32)

    def encoder() -> Any:
        layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)

    return {
        "resnet18": (lambda: tv.models.resnet18(weights=None), image),
        "resnet50": (lambda: tv.models.resnet50(weights=None), image),
        "densenet121": (lambda: tv.models.densenet121(weights=None), image),
        "vgg16": (lambda: tv.models.vgg16(weights=None), image),
        "transformer-encoder": (encoder, lambda: torch.randn(2, 16, 512)),
    }


def _real_ddp_buckets(torch: Any, module: Any, x: Any, names: dict[int, str],
                      iterations: int, **ddp_args: Any) -> tuple[list[set[str]], list[str]]:
    """Run ``iterations`` DDP iterations; the reducer's buckets after them and the ready
    order of the first backward (post-accumulate-grad hooks, as gradsched's capture)."""
    ddp = torch.nn.parallel.DistributedDataParallel(module, **ddp_args)
    order: list[str] = []
    handles = [p.register_post_accumulate_grad_hook(lambda t: order.append(names[id(t)]))
               for p in module.parameters() if p.requires_grad]
    try:
        for _ in range(iterations):
            ddp(x).sum().backward()
            for h in handles:
                h.remove()
            handles = []
        buckets = [{names[id(p)] for p in b.parameters()}
                   for b in ddp.reducer._get_zeros_like_grad_buckets()]
    finally:
        for h in handles:
            h.remove()
        del ddp
        module.zero_grad(set_to_none=True)
        gc.collect()
    return buckets, order


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "resnet50", "densenet121", "vgg16",
                                  "transformer-encoder"])
def test_ddp_equals_real_ddp_buckets(torch_mod: Any, gloo: None, name: str) -> None:
    """reducer.cpp ``Reducer::rebuild_buckets`` (limits {first_bucket_bytes_cap_,
    bucket_bytes_cap_} over the first backward's ready order) with distributed.py
    L86-110's caps: the planner's buckets are the real DDP's, bucket for bucket."""
    torch = torch_mod
    torch.manual_seed(0)
    torch.set_num_threads(1)
    make_model, make_input = _models(torch)[name]
    module = make_model()
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    names = {id(p): n for n, p in params}
    x = make_input()
    model = AlphaBetaModel(1e-5, 1e-10)
    counts = {}
    for cap in CAPS:
        real, order = _real_ddp_buckets(torch, module, x, names, 2, bucket_cap_mb=cap)
        trace = trace_from_rows([n for n, _ in params],
                                [p.numel() * p.element_size() for _, p in params], order)
        knobs = {} if cap is None else {"bucket_cap_mb": cap}
        planned = make_plan("ddp", trace, model, 4, knobs)
        assert plan_sets(planned) == real, f"{name} bucket_cap_mb={cap}"
        counts[cap] = len(real)
    if name == "resnet18":  # as real DDP does: explicit 25 -> 2 buckets, default 3
        assert counts[25.0] == 2 and counts[None] == 3


@pytest.mark.parametrize("cap", [None, 25.0])
def test_ddp_find_unused_parameters_equals_real_ddp(torch_mod: Any, gloo: None,
                                                   cap: float | None) -> None:
    """No rebuild with find_unused_parameters=True: the constructor's assignment over
    registration order, reversed (distributed.py L155-159, L1440)."""
    torch = torch_mod
    torch.manual_seed(0)
    make_model, _ = _models(torch)["resnet18"]
    module = make_model()
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    names = {id(p): n for n, p in params}
    real, _ = _real_ddp_buckets(torch, module, None, names, 0, bucket_cap_mb=cap,
                                find_unused_parameters=True)
    rows = [n for n, _ in params]
    trace = trace_from_rows(rows, [p.numel() * p.element_size() for _, p in params],
                            rows[::-1])
    knobs: dict[str, Any] = {"find_unused_parameters": True}
    if cap is not None:
        knobs["bucket_cap_mb"] = cap
    planned = make_plan("ddp", trace, AlphaBetaModel(1e-5, 1e-10), 4, knobs)
    assert plan_sets(planned) == real
    assert "conv1.weight" in plan_sets(planned)[-1]  # the input-side bucket goes last


def test_ddp_set_last_bucket_cap_equals_real_ddp(torch_mod: Any, gloo: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """reducer.cpp ``rebuild_buckets`` with DDP_SET_LAST_BUCKET_CAP=1."""
    torch = torch_mod
    torch.manual_seed(0)
    monkeypatch.setenv("DDP_SET_LAST_BUCKET_CAP", "1")
    make_model, make_input = _models(torch)["resnet18"]
    module = make_model()
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    names = {id(p): n for n, p in params}
    real, order = _real_ddp_buckets(torch, module, make_input(), names, 2)
    trace = trace_from_rows([n for n, _ in params],
                            [p.numel() * p.element_size() for _, p in params], order)
    planned = make_plan("ddp", trace, AlphaBetaModel(1e-5, 1e-10), 4,
                        {"set_last_bucket_cap": True})
    assert plan_sets(planned) == real
    assert len(real) == 3 and "conv1.weight" in real[-1]


@pytest.mark.parametrize("seed", range(6))
def test_fill_rule_equals_torch_compute_bucket_assignment(torch_mod: Any, seed: int) -> None:
    """``dist._compute_bucket_assignment_by_size`` (reducer.cpp
    compute_bucket_assignment_by_size) on SYNTHETIC random sizes and limits: the rebuild
    call (tensor_indices = ready order) and the constructor call (sorted by index)."""
    torch = torch_mod
    dist = torch.distributed
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    numel = rng.integers(1, 400_000, size=n)
    tensors = [torch.empty(int(k)) for k in numel]
    sizes = numel.astype(float) * 4
    first, cap = sorted(int(v) for v in rng.integers(1, 3_000_000, size=2))
    ready = rng.permutation(n).tolist()
    groups, _ = dist._compute_bucket_assignment_by_size(
        [tensors[i] for i in ready], [first, cap], [False] * n, ready)
    ends = rebuilt_ends(sizes[ready], first, cap)
    starts = [0, *ends[:-1].tolist()]
    ours = [[ready[k] for k in range(s, e)] for s, e in zip(starts, ends.tolist(), strict=True)]
    assert [list(g) for g in groups] == ours
    plain, _ = dist._compute_bucket_assignment_by_size(tensors, [first, cap], [False] * n)
    ends = fill_groups(sizes, [first, cap], overflow=True)
    starts = [0, *ends[:-1].tolist()]
    assert [list(g) for g in plain] == [list(range(s, e)) for s, e in
                                       zip(starts, ends.tolist(), strict=True)]


def test_ddp_bad_knobs() -> None:
    trace = trace_from_rows(["a", "b"], [4, 8], ["b", "a"])
    model = AlphaBetaModel(1e-5, 1e-10)
    with pytest.raises(ConfigError, match="bucket_cap_mb"):
        make_plan("ddp", trace, model, 2, {"bucket_cap_mb": "0"})
    with pytest.raises(ConfigError, match="first_bucket_mb"):
        make_plan("ddp", trace, model, 2, {"first_bucket_mb": "-1"})
    with pytest.raises(ConfigError, match="not a valid bool"):
        make_plan("ddp", trace, model, 2, {"find_unused_parameters": "maybe"})
