"""A plan's DDP caps (``planners/ddp_caps.py``) against the buckets a real
``DistributedDataParallel(bucket_cap_mb_list=...)`` rebuilds.

Real DDP: torch 2.14.1, a 1-rank gloo group on CPU (the ``gloo`` fixture of
``tests/conftest.py``). DDP rebuilds its buckets before the second forward
(``_pre_forward`` -> ``reducer._rebuild_buckets()``, torch/nn/parallel/distributed.py L1776)
and its logger records them at the next forward's ``set_runtime_stats_and_log`` (L1758, which
runs before the rebuild), so each check runs three iterations and reads
``_get_ddp_logging_data()["rebuilt_per_bucket_param_indices"]``: buckets separated by
``", "``, indices into DDP's parameter list (``named_parameters()`` with ``requires_grad``,
tied parameters once) separated by spaces, each bucket in gradient-ready order. The
comparison is on members AND order.

Plans come from the committed CPU traces of the same model (real measured times, ready
order checked against the live model), and for the models without a committed trace from the
live model's ready order (post-accumulate-grad hooks, as gradsched's capture) with SYNTHETIC
equal times (bucket membership does not depend on them), planned with
``contiguous_optimum``, ``mgwfbp`` and ``ddp-list`` on the committed comm trace
``traces/comm/cpu/gloo-tbf1gbit-p2.csv``, plus seeded random contiguous groupings.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.costmodel.base import load_comm_spec
from gradsched.errors import ConfigError, InputError
from gradsched.plan import Bucket, Plan
from gradsched.planners import make_plan
from gradsched.planners._family import MB, ends_from_mask, plan_from_ends, ready_seq
from gradsched.planners.ddp_caps import (
    check_expressible,
    ddp_caps,
    rebuilt_groups,
    shortest_cap_mb,
    torch_cap_bytes,
)
from gradsched.replay import replay
from gradsched.traces import ComputeTrace
from tests.conftest import synthetic_compute_trace
from tests.planners.test_ddp import trace_from_rows

REPO = Path(__file__).resolve().parents[2]
COMM = REPO / "traces" / "comm" / "cpu" / "gloo-tbf1gbit-p2.csv"
LOG_KEY = "rebuilt_per_bucket_param_indices"
Groups = list[list[str]]


# -- the real DDP --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch_mod() -> Any:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def ddp_params(module: Any) -> list[tuple[str, Any]]:
    """DDP's parameter list: ``named_parameters()`` (a tied parameter once) that need a
    gradient (distributed.py ``_build_params_for_reducer``)."""
    return [(n, p) for n, p in module.named_parameters() if p.requires_grad]


def ready_order(torch: Any, module: Any, step: Callable[[Any], Any]) -> list[str]:
    """Parameter names in the order their gradients are accumulated in one backward of a
    DDP-wrapped module (post-accumulate-grad hooks, as gradsched's capture)."""
    params = ddp_params(module)
    names = {id(p): n for n, p in params}
    order: list[str] = []
    handles = [p.register_post_accumulate_grad_hook(lambda t: order.append(names[id(t)]))
               for _, p in params]
    ddp = torch.nn.parallel.DistributedDataParallel(module)
    try:
        step(ddp).backward()
    finally:
        for h in handles:
            h.remove()
        del ddp
        module.zero_grad(set_to_none=True)
        gc.collect()
    return order


def real_rebuilt(torch: Any, module: Any, step: Callable[[Any], Any],
                 caps_mb: list[float]) -> Groups:
    """The buckets DDP rebuilds with ``bucket_cap_mb_list=caps_mb`` (names, ready order)."""
    names = [n for n, _ in ddp_params(module)]
    ddp = torch.nn.parallel.DistributedDataParallel(module, bucket_cap_mb_list=list(caps_mb))
    try:
        for _ in range(3):
            step(ddp).backward()
        logged = ddp._get_ddp_logging_data()[LOG_KEY]
    finally:
        del ddp
        module.zero_grad(set_to_none=True)
        gc.collect()
    return [[names[int(i)] for i in bucket.split()] for bucket in logged.split(", ")]


def plan_groups(plan: Plan) -> Groups:
    return [list(b.tensors) for b in plan.buckets]


def live_trace(module: Any, order: list[str]) -> ComputeTrace:
    """Sizes from the module, ``order`` as the ready order; SYNTHETIC equal times."""
    params = ddp_params(module)
    return trace_from_rows([n for n, _ in params],
                           [p.numel() * p.element_size() for _, p in params], order)


def random_plans(trace: ComputeTrace, seed: int, count: int) -> list[Plan]:
    """Seeded random contiguous groupings of the ready order."""
    seq = ready_seq(trace)
    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(count):
        cuts = (rng.random(seq.n - 1) < rng.uniform(0.05, 0.5)).tolist()
        plans.append(plan_from_ends("random", seq, ends_from_mask(cuts, seq.n), knobs={}))
    return plans


def assert_real_matches(torch: Any, module: Any, step: Callable[[Any], Any],
                        trace: ComputeTrace, plans: list[Plan], *, exact: bool = False) -> None:
    """The paste caps (and with ``exact`` the exact caps) of every plan rebuild its
    buckets in real DDP."""
    for plan in plans:
        caps = ddp_caps(plan, trace)
        want = plan_groups(plan)
        assert real_rebuilt(torch, module, step, list(caps.paste_mb)) == want, plan.algorithm
        if exact:
            assert real_rebuilt(torch, module, step, list(caps.exact_mb)) == want


def image_step(torch: Any, side: int, dtype: Any) -> Callable[[Any], Any]:
    x = torch.randn(2, 3, side, side, generator=torch.Generator().manual_seed(1)).to(dtype)
    return lambda net: net(x).float().sum()


def zoo_module(name: str, dtype: str = "fp32") -> Any:
    from gradsched.workloads.zoo import build_model

    return build_model(name, 2, dtype=dtype).model


def committed(name: str) -> ComputeTrace:
    return ComputeTrace.load(REPO / "traces" / "compute" / "cpu" / f"{name}.csv")


def planned(trace: ComputeTrace, names: tuple[str, ...] = ("contiguous_optimum", "mgwfbp",
                                                            "ddp-list")) -> list[Plan]:
    model = load_comm_spec(str(COMM))
    return [make_plan(n, trace, model, 2) for n in names]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "trace_stem", "side"), [
    ("resnet18", "resnet18-b4-cpu-fp32", 32),
    ("mobilenet_v2", "mobilenet_v2-b8-cpu-fp32", 32),
])
def test_committed_trace_plans_rebuild_in_real_ddp(torch_mod: Any, gloo: None, model: str,
                                                   trace_stem: str, side: int) -> None:
    """Plans of the committed (measured) trace, caps pasted into real DDP: the model's own
    buckets, member for member, in order."""
    torch = torch_mod
    module = zoo_module(model)
    step = image_step(torch, side, torch.float32)
    trace = committed(trace_stem)
    assert ready_order(torch, module, step) == list(ready_seq(trace).names)
    plans = planned(trace) + random_plans(trace, seed=7, count=2)
    assert any(p.n_buckets > 2 for p in plans)
    assert_real_matches(torch, module, step, trace, plans, exact=model == "resnet18")


def test_bf16_parameters(torch_mod: Any, gloo: None) -> None:
    """bf16 parameters (one (dtype, device) key, 2 bytes per element)."""
    torch = torch_mod
    module = zoo_module("resnet18", "bf16")
    assert {p.dtype for p in module.parameters()} == {torch.bfloat16}
    step = image_step(torch, 16, torch.bfloat16)
    trace = live_trace(module, ready_order(torch, module, step))
    plans = planned(trace, ("contiguous_optimum",)) + random_plans(trace, seed=3, count=1)
    assert_real_matches(torch, module, step, trace, plans)


class TiedLM:
    """A small language model whose output projection is the embedding (tied weights),
    built lazily so that the module imports torch only in the test."""

    @staticmethod
    def build(torch: Any) -> Any:
        nn = torch.nn

        class Model(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(500, 64)
                layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
                self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = nn.Linear(64, 500, bias=True)
                self.head.weight = self.embed.weight

            def forward(self, ids: Any) -> Any:
                return self.head(self.body(self.embed(ids)))

        return Model()


def test_tied_parameters(torch_mod: Any, gloo: None) -> None:
    """Embedding weight shared with the output projection: DDP (and the plan) see it once."""
    torch = torch_mod
    torch.manual_seed(0)
    module = TiedLM.build(torch)
    names = [n for n, _ in ddp_params(module)]
    assert "embed.weight" in names and "head.weight" not in names
    ids = torch.randint(0, 500, (2, 12), generator=torch.Generator().manual_seed(2))

    def step(net: Any) -> Any:
        return net(ids).sum()

    trace = live_trace(module, ready_order(torch, module, step))
    plans = planned(trace, ("contiguous_optimum",)) + random_plans(trace, seed=5, count=2)
    assert_real_matches(torch, module, step, trace, plans)


def test_ready_order_not_reverse_registration(torch_mod: Any, gloo: None) -> None:
    """Modules registered in another order than forward uses them: the caps follow the
    gradient-ready order, not the reverse registration order."""
    torch = torch_mod
    torch.manual_seed(0)
    nn = torch.nn

    class Shuffled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(96, 96)
            self.b = nn.Linear(96, 10)
            self.c = nn.Linear(32, 96)
            self.d = nn.Linear(96, 96)

        def forward(self, x: Any) -> Any:  # uses c, a, d, b
            return self.b(self.d(torch.relu(self.a(torch.relu(self.c(x))))))

    module = Shuffled()
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(3))

    def step(net: Any) -> Any:
        return net(x).sum()

    order = ready_order(torch, module, step)
    registration = [n for n, _ in ddp_params(module)]
    assert order != registration[::-1]
    trace = live_trace(module, order)
    plans = planned(trace, ("contiguous_optimum",)) + random_plans(trace, seed=11, count=2)
    assert_real_matches(torch, module, step, trace, plans)


@pytest.mark.parametrize("planted", ["up", "down"])
def test_planted_off_by_one_cap_changes_real_buckets(torch_mod: Any, gloo: None,
                                                     planted: str) -> None:
    """A cap raised past its bucket by the next tensor, or lowered to B - L, gives other
    buckets in real DDP: the comparison above can fail. The mirror ``rebuilt_groups``
    predicts the shifted buckets."""
    torch = torch_mod
    module = zoo_module("resnet18")
    step = image_step(torch, 32, torch.float32)
    trace = committed("resnet18-b4-cpu-fp32")
    seq = ready_seq(trace)
    plan = plan_from_ends("planted", seq, np.asarray([4, 9, 20, seq.n]), knobs={})
    exact = ddp_caps(plan, trace)
    caps = list(exact.exact_mb)
    total, last = exact.bucket_bytes[1], exact.last_member_bytes[1]  # bucket 1: tensors 4..8
    caps[1] = (total + int(seq.nbytes[9])) / MB if planted == "up" else (total - last) / MB
    assert real_rebuilt(torch, module, step, list(exact.exact_mb)) == plan_groups(plan)
    real = real_rebuilt(torch, module, step, caps)
    assert real != plan_groups(plan)
    ends = rebuilt_groups(seq.nbytes.tolist(), caps)
    starts = [0, *ends[:-1]]
    assert real == [list(seq.names[s:e]) for s, e in zip(starts, ends, strict=True)]


# -- the pure rules ------------------------------------------------------------------------
def test_cap_window_edges() -> None:
    """``B - L`` closes the bucket one tensor early (excluded), ``B`` rebuilds it
    (included), one byte over ``B`` absorbs the next tensor."""
    sizes = [300, 500, 700, 200]
    total, last = 800, 500  # bucket {0, 1}
    assert rebuilt_groups(sizes, [total / MB, 1e6]) == [2, 4]
    assert rebuilt_groups(sizes, [(total - last) / MB, 1e6]) == [1, 4]
    assert rebuilt_groups(sizes, [(total - last + 1) / MB, 1e6]) == [2, 4]
    assert rebuilt_groups(sizes, [(total + 1) / MB, 1e6]) == [3, 4]
    cap = shortest_cap_mb(total, last)
    assert total - last < torch_cap_bytes(cap) <= total
    last_bucket = shortest_cap_mb(total, last, is_last_bucket=True)
    assert torch_cap_bytes(last_bucket) > total - last


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 10 * MB).map(lambda k: 4 * k), min_size=1, max_size=40),
       data=st.data())
def test_paste_caps_rebuild_random_groupings(sizes: list[int], data: st.DataObject) -> None:
    """For any contiguous grouping, the paste caps and the exact caps rebuild it (the
    mirror), and ``ddp`` with the knob bucket_cap_mb_list plans it."""
    n = len(sizes)
    cuts = data.draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1))
    names = [f"t{i}" for i in range(n)]
    trace = trace_from_rows(names[::-1], sizes[::-1], names)
    seq = ready_seq(trace)
    ends = ends_from_mask(cuts, n)
    plan = plan_from_ends("random", seq, ends, knobs={})
    caps = ddp_caps(plan, trace)
    for mb in (caps.paste_mb, caps.exact_mb):
        assert rebuilt_groups(seq.nbytes.tolist(), list(mb)) == ends.tolist()
        knob = ",".join(repr(c) for c in mb)
        listed = make_plan("ddp", trace, load_comm_spec(str(COMM)), 2,
                           {"bucket_cap_mb_list": knob})
        assert plan_groups(listed) == plan_groups(plan)


@pytest.mark.parametrize("seed", range(4))
def test_mirror_equals_torch_assignment(torch_mod: Any, seed: int) -> None:
    """``rebuilt_groups`` equals ``dist._compute_bucket_assignment_by_size`` (the C++ rule
    the rebuild calls) with per-bucket limits, on SYNTHETIC random sizes and caps."""
    dist = torch_mod.distributed
    rng = np.random.default_rng(seed)
    numel = rng.integers(1, 300_000, size=int(rng.integers(2, 50)))
    caps = [float(c) for c in np.round(rng.uniform(0.01, 2.0, size=5), 3)]
    tensors = [torch_mod.empty(int(k)) for k in numel]
    groups, _ = dist._compute_bucket_assignment_by_size(
        tensors, [torch_cap_bytes(c) for c in caps], [False] * len(tensors),
        list(range(len(tensors))))
    ends = np.cumsum([len(g) for g in groups]).tolist()
    assert rebuilt_groups((numel * 4).tolist(), caps) == ends


def test_ddp_list_replays_as_ddp_with_its_caps() -> None:
    """``ddp-list``: the contiguous optimum's buckets; its replay equals ``ddp`` with the
    knob bucket_cap_mb_list set to its caps."""
    trace = committed("resnet18-b4-cpu-fp32")
    model = load_comm_spec(str(COMM))
    listed = make_plan("ddp-list", trace, model, 2)
    optimum = make_plan("contiguous_optimum", trace, model, 2)
    assert plan_groups(listed) == plan_groups(optimum)
    caps = listed.info["bucket_cap_mb_list"]
    assert listed.info["paste_line"].endswith(f"bucket_cap_mb_list={caps!r})")
    ddp = make_plan("ddp", trace, model, 2, {"bucket_cap_mb_list": caps})
    assert plan_groups(ddp) == plan_groups(listed)
    assert replay(trace, ddp, model, 2).iteration_s == replay(trace, listed, model, 2).iteration_s


@pytest.mark.parametrize(("knobs", "message"), [
    ({"bucket_cap_mb": "25"}, "excludes knob bucket_cap_mb"),
    ({"first_bucket_mb": "1"}, "excludes knob first_bucket_mb"),
    ({"find_unused_parameters": "true"}, "excludes knob find_unused_parameters"),
    ({"set_last_bucket_cap": "true"}, "excludes knob set_last_bucket_cap"),
    ({"bucket_cap_mb_list": "1,x"}, "not a valid list of float"),
    ({"bucket_cap_mb_list": "1,0"}, "bucket_cap_mb_list must be a finite number > 0"),
])
def test_cap_list_knob_refusals(knobs: dict[str, str], message: str) -> None:
    trace = synthetic_compute_trace(6)
    full = {"bucket_cap_mb_list": "1,2"} | knobs
    with pytest.raises(ConfigError, match=message):
        make_plan("ddp", trace, load_comm_spec(str(COMM)), 2, full)


def _plan(**changes: Any) -> Plan:
    bucket = Bucket(tensors=("layer1.weight", "layer0.weight"))
    plan_fields = {k: changes.pop(k) for k in ("update", "channels", "credit_bytes")
                   if k in changes}
    return Plan("p", (Bucket(tensors=bucket.tensors, **changes),), **plan_fields)


@pytest.mark.parametrize(("plan", "field"), [
    (_plan(update="per_layer"), "update"),
    (_plan(collective="rs_ag"), "collective"),
    (_plan(chunks=2), "chunks"),
    (_plan(priority=0), "priority"),
    (_plan(release_s=0.1), "release_s"),
    (_plan(algorithm="ring"), "algorithm"),
    (_plan(channels=2), "channels"),
    (_plan(credit_bytes=1e6), "credit_bytes"),
])
def test_check_expressible_names_the_property(plan: Plan, field: str) -> None:
    with pytest.raises(InputError, match="cannot be expressed") as info:
        check_expressible(plan)
    assert info.value.field == field


def test_non_contiguous_bucket_is_refused() -> None:
    trace = synthetic_compute_trace(4)  # ready order: layer3, layer2, layer1, layer0
    plan = Plan("p", (Bucket(("layer3.weight", "layer1.weight")),
                      Bucket(("layer2.weight", "layer0.weight"))))
    with pytest.raises(InputError, match="not the next contiguous run") as info:
        ddp_caps(plan, trace)
    assert info.value.field == "buckets"
    assert "layer1.weight" in str(info.value)


def test_each_dtype_key_restarts_the_list(torch_mod: Any, gloo: None) -> None:
    """Mixed fp32/bf16 parameters: DDP fills one bucket sequence per (dtype, device) key,
    and each key starts again at the list's first cap (observed on the installed torch):
    one list cannot place a mixed model's buckets independently, which is why ``ddp_caps``
    takes a one-dtype trace."""
    torch = torch_mod
    torch.manual_seed(0)
    nn = torch.nn

    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(256, 256)
            self.b = nn.Linear(256, 256).bfloat16()
            self.c = nn.Linear(256, 256)
            self.d = nn.Linear(256, 256).bfloat16()

        def forward(self, x: Any) -> Any:
            x = self.b(self.a(x).bfloat16()).float()
            return self.d(self.c(x).bfloat16()).float()

    module = Mixed()
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(4))

    def step(net: Any) -> Any:
        return net(x).sum()

    # cap 0 (260 fp32 rows of 256) closes each key's pair of layers; cap 1 would split bf16
    caps = [256 * 260 * 4 / MB, 256 * 257 * 2 / MB]
    real = real_rebuilt(torch, module, step, caps)
    assert sorted(real) == [["c.bias", "c.weight", "a.bias", "a.weight"],
                            ["d.bias", "d.weight", "b.bias", "b.weight"]]


@pytest.mark.parametrize("text", ["1.5,0.25", "[1.5, 0.25]", " 1.5 , 0.25 "])
def test_cap_list_knob_parses(text: str) -> None:
    trace = synthetic_compute_trace(6)
    plan = make_plan("ddp", trace, load_comm_spec(str(COMM)), 2, {"bucket_cap_mb_list": text})
    assert plan.knobs["bucket_cap_mb_list"] == [1.5, 0.25]
    assert plan.info["bucket_cap_bytes_list"] == [int(1.5 * MB), int(0.25 * MB)]
