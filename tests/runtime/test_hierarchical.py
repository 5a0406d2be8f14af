"""Hierarchical all-reduce buckets (runtime/hierarchical.py) are exact, for real.

One gloo loopback launch of 4 ranks as 2 nodes x 2 ranks trains the test models
(synthetic data from runtime/reference.py) with plans whose buckets are all
``algorithm: hierarchical`` (several shapes: per tensor, chunked with priorities and a
per-layer update, one bucket with a length that does not divide by the ranks per node,
a mix with flat buckets), and the final parameters must equal one process trained on the
full batch (fp32 tolerance of tests/runtime/test_executor.py). A second launch, 4 ranks
as 1 node x 4 and then as 4 nodes x 1 (the degenerate layouts), checks the same. Error
paths: a world that is not a multiple of the ranks per node, a missing layout.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gradsched.errors import ConfigError  # noqa: E402
from gradsched.plan import Bucket, Plan  # noqa: E402
from gradsched.runtime.hierarchical import NodeLayout, resolve_ranks_per_node  # noqa: E402
from gradsched.runtime.reference import make_test_model, train_single  # noqa: E402

ATOL, RTOL = 1e-6, 1e-5
STEPS, BATCH, WORLD = 3, 4, 4


def _names(model: str) -> list[str]:
    return [n for n, p in make_test_model(model).named_parameters() if p.requires_grad]


def _plans(model: str) -> dict[str, Plan]:
    ready = _names(model)[::-1]
    h = "hierarchical"
    return {
        "per-tensor": Plan("wfbp-hier", tuple(Bucket((n,), algorithm=h) for n in ready)),
        "one-bucket": Plan("syncsgd-hier", (Bucket(tuple(ready), algorithm=h),)),
        "chunked-prio": Plan("bs-hier", tuple(Bucket((n,), chunks=3, priority=len(ready) - i,
                                                     algorithm=h)
                                              for i, n in enumerate(ready)),
                             update="per_layer"),
        "mixed": Plan("mixed", tuple(Bucket((n,), algorithm=h if i % 2 else "default")
                                     for i, n in enumerate(ready))),
    }


def _cases() -> list[dict]:
    cases = []
    for model in ("mlp", "frozen"):
        for opt in ("sgd", "adamw"):
            for shape, plan in _plans(model).items():
                cases.append({"id": f"{model}-{opt}-{shape}", "model": model,
                              "optimizer": opt, "plan": plan.to_dict(), "steps": STEPS,
                              "batch": BATCH, "find_unused": False})
    return cases


CASES = _cases()


def _launch(ranks_per_node: int, cases: list[dict]) -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    payload = {"cases": cases, "ddp": [], "timeout_s": 60, "ranks_per_node": ranks_per_node}
    return launch("gradsched.runtime.tasks:exactness_cases", payload,
                  LaunchSpec(WORLD, op_timeout_s=60, deadline_s=300))


@pytest.fixture(scope="module")
def two_by_two() -> list[dict]:
    return _launch(2, CASES)


def _check(results: list[dict], case: dict) -> None:
    ref = train_single(case["model"], case["optimizer"], WORLD, STEPS, BATCH)
    got = results[0]["cases"][case["id"]]["params"]
    assert set(got) == set(ref)
    for name, values in got.items():
        torch.testing.assert_close(torch.tensor(values), ref[name].reshape(-1), atol=ATOL,
                                   rtol=RTOL, msg=lambda m, name=name: f"{name}: {m}")
    for other in results[1:]:
        assert other["cases"][case["id"]]["params"] == got


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_hierarchical_2x2_matches_full_batch_reference(two_by_two, case):
    _check(two_by_two, case)


def test_hierarchical_issues_one_reduction_per_chunk(two_by_two):
    for case in CASES:
        plan = Plan.from_dict(case["plan"])
        for rank_result in two_by_two:
            for stats in rank_result["cases"][case["id"]]["stats"]:
                assert stats["bucket_launches"] == [b.chunks for b in plan.buckets]


def test_training_actually_moved_the_weights(two_by_two):
    """The check above could pass vacuously if nothing trained: the weights must differ
    from the initial ones by more than the tolerance."""
    case = CASES[0]
    init = dict(make_test_model(case["model"]).named_parameters())
    got = two_by_two[0]["cases"][case["id"]]["params"]
    moved = max(float((torch.tensor(v) - init[n].detach().reshape(-1)).abs().max())
                for n, v in got.items())
    assert moved > 100 * ATOL


@pytest.mark.parametrize("ranks_per_node", [1, 4])
def test_degenerate_layouts_are_exact(ranks_per_node):
    cases = [c for c in CASES if c["id"] in ("mlp-sgd-one-bucket", "mlp-adamw-chunked-prio")]
    results = _launch(ranks_per_node, cases)
    for case in cases:
        _check(results, case)


def test_layout_groups():
    layout = NodeLayout(6, 3)
    assert layout.nodes == 2
    assert layout.node_ranks(1) == [3, 4, 5]
    assert layout.cross_ranks(2) == [2, 5]


def test_bad_layouts_are_refused(monkeypatch):
    with pytest.raises(ConfigError, match="not a multiple"):
        NodeLayout(6, 4)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="ranks per node"):
        resolve_ranks_per_node(4, None)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(ConfigError, match="not an integer"):
        resolve_ranks_per_node(4, None)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert resolve_ranks_per_node(4, None).nodes == 2


def test_run_cli_times_a_hierarchical_plan(tmp_path, capsys):
    import pandas as pd

    from gradsched.cli import main
    from gradsched.runtime.coverage import model_parameters

    ready = list(model_parameters("tiny-mlp", 4, None))[::-1]
    plan = tmp_path / "hier.json"
    Plan("hier", tuple(Bucket((n,), algorithm="hierarchical") for n in ready)).save(plan)
    out = tmp_path / "m.csv"
    base = ["run", "--plan", str(plan), "--model", "tiny-mlp", "--batch-size", "4",
            "--world-size", "4", "--iters", "2", "--warmup", "1", "-o", str(out)]
    assert main(base) != 0  # no node layout
    assert "--ranks-per-node" in capsys.readouterr().err
    assert main([*base, "--ranks-per-node", "3"]) != 0
    assert "not a multiple" in capsys.readouterr().err
    assert main([*base, "--ranks-per-node", "2"]) == 0
    assert len(pd.read_csv(out)) == 2


def test_dead_peer_ends_every_rank():
    """Rank 3 (node 1) dies at step 1 while the others are inside hierarchical
    reductions: the run ends with an error naming it, well before any deadline."""
    import time

    from gradsched.distributed import DistributedError, LaunchSpec, launch

    case = next(c for c in CASES if c["id"] == "mlp-sgd-per-tensor")
    payload = {"cases": [case], "ddp": [], "timeout_s": 20, "ranks_per_node": 2,
               "die": [3, 1]}
    start = time.monotonic()
    with pytest.raises(DistributedError, match="rank 3"):
        launch("gradsched.runtime.tasks:exactness_cases", payload,
               LaunchSpec(WORLD, op_timeout_s=20, deadline_s=120))
    assert time.monotonic() - start < 90


def test_as_hierarchical_plan_keeps_the_buckets():
    from gradsched.runtime.hierarchical import as_hierarchical_plan

    plan = Plan("ddp", (Bucket(("a", "b"), chunks=2, priority=1), Bucket(("c",))))
    out = as_hierarchical_plan(plan)
    assert [b.tensors for b in out.buckets] == [b.tensors for b in plan.buckets]
    assert [b.chunks for b in out.buckets] == [2, 1]
    assert {b.algorithm for b in out.buckets} == {"hierarchical"}
    with pytest.raises(ConfigError, match="rs_ag"):
        as_hierarchical_plan(Plan("dear", (Bucket(("a",), "rs_ag"),)))
