"""The executor computes exactly what synchronous SGD computes, for plans of every shape.

Real multi-process runs (gloo on loopback, CPU) through the launcher: one launch per world
size (2 and 3, a non-power of two) trains every (model, optimizer, plan) case for 3 steps
and PyTorch DDP as a second reference. The final parameters must equal a single process
trained on the full batch within the fp32 tolerance below, every rank must hold the same
parameters, and every step must issue exactly the plan's collectives (no gradient reduced
twice or missed). In-process tests (a world-size-1 gloo group) cover the error paths.

Tolerance: atol 1e-6, rtol 1e-5 (fp32; the summation order of the reduction differs from
the single process, AdamW divides by sqrt(v) and so amplifies rounding in the first steps).
Measured worst deviations are printed by ``test_worst_deviation`` (run with ``-s``).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from gradsched.errors import ConfigError  # noqa: E402
from gradsched.plan import Bucket, Plan  # noqa: E402
from gradsched.runtime.executor import PlanExecutor, launch_order  # noqa: E402
from gradsched.runtime.reference import (  # noqa: E402
    PER_SHARD,
    loss_of,
    make_optimizer,
    make_shard,
    make_test_model,
    train_single,
)

ATOL, RTOL = 1e-6, 1e-5
STEPS, BATCH = 3, 4
MODELS = ("mlp", "frozen", "branchy")
OPTIMIZERS = ("sgd", "adamw")
SHAPES = ("wfbp", "syncsgd", "ddp", "bytescheduler", "dear", "rs_ag_global", "p2p")
P2P_ALGORITHMS = ("lp", "ring", "rhd", "mst", "rd")
WORLDS = (2, 3)


# ----------------------------------------------------------------------------- plans
def _trainable(model_name: str) -> list[tuple[str, str, int]]:
    """(name, owning module, numel) of trainable parameters, forward order."""
    model = make_test_model(model_name)
    return [(n, n.rpartition(".")[0], p.numel()) for n, p in model.named_parameters()
            if p.requires_grad]


def _layers(model_name: str) -> list[list[str]]:
    """Trainable parameter names grouped by owning module, modules in forward order."""
    groups: dict[str, list[str]] = {}
    for name, owner, _ in _trainable(model_name):
        groups.setdefault(owner, []).append(name)
    return list(groups.values())


def make_shape_plan(shape: str, model_name: str) -> Plan:
    """A plan of the given shape over the model's trainable parameters (ready order)."""
    names = [n for n, _, _ in _trainable(model_name)]
    ready = names[::-1]
    layers = _layers(model_name)
    if shape == "wfbp":
        return Plan("wfbp", tuple(Bucket((n,)) for n in ready))
    if shape == "syncsgd":
        return Plan("syncsgd", (Bucket(tuple(ready)),))
    if shape == "ddp":  # uneven buckets: 1 tensor, 2 tensors, the rest
        cuts = [ready[:1], ready[1:3], ready[3:]]
        return Plan("ddp", tuple(Bucket(tuple(c)) for c in cuts if c))
    if shape == "bytescheduler":  # per layer, 3 equal chunks, priority = forward index
        buckets = [Bucket(tuple(layer), chunks=3, priority=i) for i, layer in enumerate(layers)]
        return Plan("bytescheduler", tuple(reversed(buckets)), update="per_layer", channels=2)
    if shape == "dear":  # two layers per group, reduce-scatter + all-gather, per-layer update
        groups = [[n for layer in layers[i:i + 2] for n in layer]
                  for i in range(0, len(layers), 2)]
        buckets = [Bucket(tuple(g), "rs_ag", chunks=1 + (i % 2)) for i, g in enumerate(groups)]
        return Plan("dear", tuple(reversed(buckets)), update="per_layer")
    if shape == "p2p":  # every bucket reduced by one of gradsched.collectives' algorithms
        return Plan("p2p", tuple(Bucket(tuple(layer), chunks=1 + i % 2,
                                        algorithm=P2P_ALGORITHMS[i % len(P2P_ALGORITHMS)])
                                 for i, layer in enumerate(reversed(layers))))
    if shape == "rs_ag_global":
        return Plan("rs_ag_global", (Bucket(tuple(ready[:2]), "rs_ag", chunks=2),
                                     Bucket(tuple(ready[2:]), "rs_ag")))
    raise AssertionError(shape)


def expected_traffic(plan: Plan, model_name: str, world: int, flags: bool
                     ) -> tuple[dict[str, int], dict[str, int]]:
    """Collectives and bytes per step, computed from the plan (independently of the
    executor): chunks of numel (+ one used-flag per member) padded to equal partitions."""
    numel = {n: k for n, _, k in _trainable(model_name)}
    counts = {"all_reduce": 0, "reduce_scatter": 0, "all_gather": 0}
    nbytes = dict(counts)
    for b in plan.buckets:
        payload = sum(numel[n] for n in b.tensors) + (len(b.tensors) if flags else 0)
        if b.collective in ("rs_ag", "reduce_scatter"):  # the executor gathers both back
            chunk = math.ceil(payload / (b.chunks * world)) * world
            for kind in ("reduce_scatter", "all_gather"):
                counts[kind] += b.chunks
                nbytes[kind] += b.chunks * chunk * 4
        else:
            counts["all_reduce"] += b.chunks
            nbytes["all_reduce"] += b.chunks * math.ceil(payload / b.chunks) * 4
    return counts, nbytes


def _cases() -> list[dict]:
    cases = []
    for model in MODELS:
        for opt in OPTIMIZERS:
            for shape in SHAPES:
                cases.append({"id": f"{model}-{opt}-{shape}", "model": model, "optimizer": opt,
                              "shape": shape, "plan": make_shape_plan(shape, model).to_dict(),
                              "steps": STEPS, "batch": BATCH,
                              "find_unused": model in PER_SHARD})
    # Compression at density 1 reduces exactly what the dense all-reduce does.
    for method in ("topk", "importance"):
        cases.append({"id": f"mlp-sgd-{method}-density1", "model": "mlp", "optimizer": "sgd",
                      "shape": "ddp", "plan": make_shape_plan("ddp", "mlp").to_dict(),
                      "steps": STEPS, "batch": BATCH, "find_unused": False,
                      "compressor": {"method": method, "density": 1.0}})
    # Unused parameters without find_unused_parameters: zero gradients, must not hang.
    for shape in ("ddp", "dear"):
        cases.append({"id": f"branchy-sgd-{shape}-nofind", "model": "branchy",
                      "optimizer": "sgd", "shape": shape,
                      "plan": make_shape_plan(shape, "branchy").to_dict(), "steps": STEPS,
                      "batch": BATCH, "find_unused": False})
    return cases


def _registry_plans() -> dict[str, Plan]:
    """Every registered planner's plan on a synthetic trace of the tiny MLP."""
    try:
        from gradsched.costmodel.base import load_comm_spec
        from gradsched.experiments import make_plan
        from gradsched.planners import planner_names
        from gradsched.traces import ComputeTrace
    except ImportError:
        return {}
    import pandas as pd

    rows = _trainable("mlp")
    layer_index = {owner: i for i, owner in enumerate(dict.fromkeys(o for _, o, _ in rows))}
    n = len(rows)
    frame = pd.DataFrame({
        "name": [r[0] for r in rows], "layer": [layer_index[r[1]] for r in rows],
        "numel": [r[2] for r in rows], "bytes": [4 * r[2] for r in rows],
        "forward_s": [1e-4] * n, "backward_s": [2e-4] * n,
        "ready_order": list(range(n))[::-1],
    })
    meta = {"kind": "compute", "model": "synthetic-tiny-mlp", "batch_size": BATCH,
            "device": "none", "dtype": "fp32", "world_size": 1, "software": {},
            "capture_method": "synthetic", "iterations": None, "date": "2026-11-23",
            "source": "SYNTHETIC test fixture, not measured"}
    trace = ComputeTrace.from_frame(frame, meta)
    from gradsched.costmodel.ps import PSModel, load_ps
    from gradsched.planners import PS_ALGORITHMS

    comm = load_comm_spec("alpha-beta:alpha=1e-4,beta=1e-8")
    # the parameter-server planners price their plans on a PS model; their buckets
    # (all_reduce, rs_ag) run on the all-reduce executor as they are
    ps = PSModel(load_ps("servers=1,colocated=0,p2p=alpha-beta:alpha=1e-4,beta=1e-8", 2))
    plans = {}
    for name in planner_names():
        plans[name] = make_plan(name, trace, ps if name in PS_ALGORITHMS else comm, 2, {})
    return plans


CASES = _cases()
CASE_BY_ID = {c["id"]: c for c in CASES}


def _launch(world: int, extra_cases: list[dict] | None = None) -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    ddp = [{"id": f"{m}-{o}", "model": m, "optimizer": o, "steps": STEPS, "batch": BATCH}
           for m in MODELS for o in OPTIMIZERS]
    payload = {"cases": CASES + (extra_cases or []), "ddp": ddp, "timeout_s": 60}
    return launch("gradsched.runtime.tasks:exactness_cases", payload,
                  LaunchSpec(world, op_timeout_s=60, deadline_s=300))


@pytest.fixture(scope="module")
def registry_plans() -> dict[str, Plan]:
    return _registry_plans()


@pytest.fixture(scope="module")
def runs(registry_plans: dict[str, Plan]) -> dict[int, list[dict]]:
    extra = [{"id": f"planner-{name}", "model": "mlp", "optimizer": "sgd",
              "plan": plan.to_dict(), "steps": STEPS, "batch": BATCH, "find_unused": False}
             for name, plan in registry_plans.items()]
    return {2: _launch(2, extra), 3: _launch(3)}


_reference_cache: dict[tuple[str, str, int], dict] = {}


def reference(model: str, opt: str, world: int) -> dict:
    key = (model, opt, world)
    if key not in _reference_cache:
        _reference_cache[key] = train_single(model, opt, world, STEPS, BATCH)
    return _reference_cache[key]


def _deviation(got: dict[str, list[float]], ref: dict) -> float:
    worst = 0.0
    assert set(got) == set(ref)
    for name, values in got.items():
        tensor = torch.tensor(values)
        expect = ref[name].reshape(-1)
        torch.testing.assert_close(tensor, expect, atol=ATOL, rtol=RTOL,
                                   msg=lambda m, name=name: f"{name}: {m}")
        worst = max(worst, float((tensor - expect).abs().max()))
    return worst


# ----------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("case_id", [c["id"] for c in CASES if not c["id"].endswith("nofind")])
def test_executor_matches_full_batch_reference(runs, world, case_id):
    case = CASE_BY_ID[case_id]
    results = runs[world]
    got = results[0]["cases"][case_id]["params"]
    _deviation(got, reference(case["model"], case["optimizer"], world))
    for other in results[1:]:  # every rank holds exactly the same parameters
        assert other["cases"][case_id]["params"] == got


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("opt", OPTIMIZERS)
def test_ddp_reference_agrees(runs, world, model, opt):
    """DDP itself matches the single process, and the executor matches DDP."""
    ddp = runs[world][0]["ddp"][f"{model}-{opt}"]
    _deviation(ddp, reference(model, opt, world))
    for shape in SHAPES:
        mine = runs[world][0]["cases"][f"{model}-{opt}-{shape}"]["params"]
        _deviation(mine, {n: torch.tensor(v) for n, v in ddp.items()})


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("case_id", [c["id"] for c in CASES])
def test_each_gradient_reduced_exactly_once_per_step(runs, world, case_id):
    case = CASE_BY_ID[case_id]
    plan = Plan.from_dict(case["plan"])
    counts, nbytes = expected_traffic(plan, case["model"], world, case["find_unused"])
    for rank_result in runs[world]:
        result = rank_result["cases"][case_id]
        assert result["expected"] == {"collectives": counts, "bytes": nbytes}
        assert len(result["stats"]) == STEPS
        for stats in result["stats"]:
            assert stats["collectives"] == counts
            assert stats["bytes"] == nbytes
            assert stats["bucket_launches"] == [b.chunks for b in plan.buckets]
            assert stats["bucket_gathers"] == [b.chunks if b.collective == "rs_ag" else 0
                                               for b in plan.buckets]
            issued = [tuple(x[1:]) for x in stats["issue_sequence"] if x[0] != "all_gather"]
            assert sorted(issued) == [(k, c) for k, b in enumerate(plan.buckets)
                                      for c in range(b.chunks)]


@pytest.mark.parametrize("world", WORLDS)
def test_unused_branch_is_completed_consistently(runs, world):
    """Step 0 uses the branch everywhere, step 1 nowhere, step 2 on rank 0 only."""
    branch = {"branch.weight", "branch.bias"}
    for case_id in ("branchy-sgd-ddp", "branchy-adamw-dear", "branchy-sgd-ddp-nofind"):
        per_rank = [r["cases"][case_id]["stats"] for r in runs[world]]
        for rank, stats in enumerate(per_rank):
            assert set(stats[0]["unused"]) == set()
            assert set(stats[1]["unused"]) == branch
            assert set(stats[2]["unused"]) == (set() if rank == 0 else branch)
        # the same collectives on every rank, in the same order
        for stats in per_rank[1:]:
            assert [s["issue_sequence"] for s in stats] == \
                   [s["issue_sequence"] for s in per_rank[0]]


@pytest.mark.parametrize("world", WORLDS)
def test_unused_without_find_unused_is_consistent(runs, world):
    for case_id in ("branchy-sgd-ddp-nofind", "branchy-sgd-dear-nofind"):
        params = [r["cases"][case_id]["params"] for r in runs[world]]
        assert all(p == params[0] for p in params[1:])


def test_every_registered_planner_runs_exactly(runs, registry_plans):
    if not registry_plans:
        pytest.skip("gradsched.planners.make_plan is not available")
    ref = reference("mlp", "sgd", 2)
    for name, plan in registry_plans.items():
        result = runs[2][0]["cases"][f"planner-{name}"]
        _deviation(result["params"], ref)
        counts, _ = expected_traffic(plan, "mlp", 2, False)
        assert result["stats"][-1]["collectives"] == counts, name


def test_worst_deviation(runs):
    worst: dict[str, float] = {}
    for world in WORLDS:
        for case in CASES:
            if case["id"].endswith("nofind"):
                continue
            got = runs[world][0]["cases"][case["id"]]["params"]
            dev = _deviation(got, reference(case["model"], case["optimizer"], world))
            key = f"{case['optimizer']}"
            worst[key] = max(worst.get(key, 0.0), dev)
    vs_ddp = 0.0
    for world in WORLDS:
        for case in CASES:
            if case["id"].endswith("nofind") or case["model"] not in MODELS:
                continue
            ddp = runs[world][0]["ddp"][f"{case['model']}-{case['optimizer']}"]
            got = runs[world][0]["cases"][case["id"]]["params"]
            vs_ddp = max(vs_ddp, _deviation(got, {n: torch.tensor(v) for n, v in ddp.items()}))
    print(f"\nworst |executor - full-batch reference| after {STEPS} steps: {worst}; "
          f"worst |executor - DDP|: {vs_ddp}")
    assert all(v <= ATOL for v in worst.values())


# ----------------------------------------------------------------------------- in-process
@pytest.fixture(scope="module")
def world1():
    created = False
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        created = True
    if dist.get_world_size() != 1:
        pytest.skip("a larger default process group is already initialised")
    yield
    if created:
        dist.destroy_process_group()


def _sgd(model):
    return make_optimizer("sgd", model.parameters())


def test_plan_naming_frozen_parameter_is_refused(world1):
    model = make_test_model("frozen")
    plan = Plan("x", (Bucket(tuple(n for n, _ in model.named_parameters())),))
    with pytest.raises(ConfigError, match="frozen"):
        PlanExecutor(model, plan, _sgd(model))


def test_plan_naming_unknown_parameter_is_refused(world1):
    model = make_test_model("mlp")
    names = [n for n, _ in model.named_parameters()]
    with pytest.raises(ConfigError, match="not a parameter"):
        PlanExecutor(model, Plan("x", (Bucket((*names, "nope.weight")),)), _sgd(model))
    with pytest.raises(ConfigError, match="in no bucket"):
        PlanExecutor(model, Plan("x", (Bucket(tuple(names[1:])),)), _sgd(model))
    with pytest.raises(ConfigError, match="buckets 0 and 1"):
        PlanExecutor(model, Plan("x", (Bucket(tuple(names)), Bucket(names[:1]))), _sgd(model))


def _train_world1(model, ex, steps=STEPS):
    for step in range(steps):
        x, y = make_shard(step, 0, 1, BATCH)
        loss_of(model, x, y).backward()
        ex.step()


@pytest.mark.parametrize("how", ["flush", "eval", "synchronized"])
def test_per_layer_updates_are_never_lost(world1, how):
    model = make_test_model("mlp")
    ex = PlanExecutor(model, make_shape_plan("bytescheduler", "mlp"), _sgd(model))
    _train_world1(model, ex)
    ref = train_single("mlp", "sgd", 1, STEPS, BATCH)
    # the last update is pending until flushed
    assert any(not torch.equal(p, ref[n]) for n, p in model.named_parameters())
    if how == "flush":
        ex.flush()
    elif how == "eval":
        model.eval()
    else:
        with ex.synchronized():
            pass
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), ref[n], atol=ATOL, rtol=RTOL)
    ex.close()
    assert "train" not in vars(model)


def test_lr_change_after_step_applies_from_next_iteration(world1):
    """A scheduler stepped after step() must not change the pending per-layer update."""
    model = make_test_model("mlp")
    opt = _sgd(model)
    ex = PlanExecutor(model, make_shape_plan("dear", "mlp"), opt)
    ref_model = make_test_model("mlp")
    ref_opt = _sgd(ref_model)
    for step in range(STEPS):
        for m, o, e in ((model, opt, ex), (ref_model, ref_opt, None)):
            x, y = make_shard(step, 0, 1, BATCH)
            loss_of(m, x, y).backward()
            if e is not None:
                e.step()
            else:
                o.step()
                o.zero_grad(set_to_none=True)
            for g in o.param_groups:
                g["lr"] *= 0.5
    ex.flush()
    for (n, p), q in zip(model.named_parameters(), ref_model.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), atol=ATOL, rtol=RTOL, msg=n)


def _two_group_adam(model):
    """Adam with two groups cutting across modules (weights and biases, different lr)."""
    named = list(model.named_parameters())
    return torch.optim.Adam([{"params": [p for n, p in named if n.endswith("weight")]},
                             {"params": [p for n, p in named if n.endswith("bias")],
                              "lr": 0.002}], lr=0.01)


@pytest.mark.parametrize("shape", ["dear", "bytescheduler"])
def test_per_layer_views_match_a_global_step_with_several_groups(world1, shape):
    """The per-layer update through views built once (runtime/layer_steps.py) gives what
    one global optimizer.step() gives, with groups that cut across modules."""
    model, ref = make_test_model("mlp"), make_test_model("mlp")
    ex = PlanExecutor(model, make_shape_plan(shape, "mlp"), _two_group_adam(model))
    ref_opt = _two_group_adam(ref)
    for step in range(STEPS):
        x, y = make_shard(step, 0, 1, BATCH)
        loss_of(model, x, y).backward()
        ex.step()
        loss_of(ref, x, y).backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
    ex.flush()
    for (n, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), atol=ATOL, rtol=RTOL, msg=n)
    ex.close()


def test_gloo_waits_on_the_host(world1):
    """Only NCCL buckets on a GPU wait on the stream; gloo keeps the timed host wait."""
    model = make_test_model("mlp")
    ex = PlanExecutor(model, make_shape_plan("dear", "mlp"), _sgd(model))
    assert ex._buckets and not any(b.stream_wait for b in ex._buckets)
    ex.close()


def test_second_backward_before_step_is_refused(world1):
    model = make_test_model("mlp")
    ex = PlanExecutor(model, make_shape_plan("wfbp", "mlp"), _sgd(model))
    x, y = make_shard(0, 0, 1, BATCH)
    loss_of(model, x, y).backward()
    with pytest.raises(RuntimeError, match=r"second backward|twice"):
        loss_of(model, x, y).backward()
    assert ex.steps == 0


def test_stale_use_of_a_parameter_is_detected(world1):
    class Sneaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(6, 4)
            self.b = torch.nn.Linear(4, 3)

        def forward(self, x):  # uses b's weight without calling b
            return torch.nn.functional.linear(self.a(x), self.b.weight, self.b.bias)

    model = Sneaky()
    names = [n for n, _ in model.named_parameters()]
    plan = Plan("x", (Bucket(tuple(names[::-1])),), update="per_layer")
    ex = PlanExecutor(model, plan, _sgd(model))
    x, y = make_shard(0, 0, 1, BATCH)
    torch.nn.functional.mse_loss(model(x), y).backward()
    ex.step()
    with pytest.raises(RuntimeError, match=r"before its per-layer update|inplace"):
        torch.nn.functional.mse_loss(model(x), y).backward()


def test_step_without_any_gradient_completes(world1):
    model = make_test_model("mlp")
    ex = PlanExecutor(model, make_shape_plan("ddp", "mlp"), _sgd(model),
                      find_unused_parameters=True)
    before = [p.detach().clone() for p in model.parameters()]
    ex.step()  # no backward at all: everything unused, nothing changes
    assert len(ex.stats.unused) == len(before)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_launch_order():
    plan = Plan("p", (Bucket(("a",), chunks=2), Bucket(("b",), chunks=2)))
    assert launch_order(plan, [10, 10]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # bucket 1 (ready second) is more urgent: it overtakes bucket 0's backlog
    prio = Plan("p", (Bucket(("a",), chunks=4, priority=1), Bucket(("b",), chunks=2,
                                                                    priority=0)))
    order = launch_order(prio, [40, 10])
    assert sorted(order) == sorted([(0, c) for c in range(4)] + [(1, 0), (1, 1)])
    assert order[0] == (0, 0)
    assert order.index((1, 1)) < order.index((0, 3))


def test_plan_naming_unknown_collective_algorithm_is_refused(world1):
    model = make_test_model("mlp")
    names = [n for n, p in model.named_parameters()]
    plan = Plan("bad", (Bucket(tuple(names), algorithm="butterfly"),))
    with pytest.raises(ConfigError, match="unknown all-reduce algorithm 'butterfly'"):
        PlanExecutor(model, plan, make_optimizer("sgd", model.parameters()))
    plan = Plan("bad", (Bucket(tuple(names), collective="rs_ag", algorithm="ring"),))
    with pytest.raises(ConfigError, match="only all_reduce buckets"):
        PlanExecutor(model, plan, make_optimizer("sgd", model.parameters()))
