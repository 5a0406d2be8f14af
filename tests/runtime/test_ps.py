"""Parameter-server plans (runtime/ps.py) executed for real are exact.

gloo loopback launches of 2 workers + 1 server and 2 workers + 2 servers train the test
models (synthetic data from runtime/reference.py) with ``algorithm: ps`` plans of several
shapes (per tensor, one bucket, chunked with priorities and a per-layer update, unused
parameters with find_unused); the workers' final parameters must equal one process
trained on the full batch of the 2 workers (tolerance of tests/runtime/test_executor.py),
and each server must serve exactly its round-robin share of the partitions. A dead server
or a dead worker must end the run with an error naming it, well before the deadline.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from gradsched.errors import ConfigError  # noqa: E402
from gradsched.plan import Bucket, Plan  # noqa: E402
from gradsched.runtime.ps import PSLayout, partition_schedule  # noqa: E402
from gradsched.runtime.reference import PER_SHARD, make_test_model, train_single  # noqa: E402

ATOL, RTOL = 1e-6, 1e-5
STEPS, BATCH, WORKERS = 3, 4, 2


def _numel(model: str) -> dict[str, int]:
    return {n: p.numel() for n, p in make_test_model(model).named_parameters()
            if p.requires_grad}


def _plans(model: str) -> dict[str, Plan]:
    ready = list(_numel(model))[::-1]
    return {
        "per-tensor": Plan("wfbp-ps", tuple(Bucket((n,), algorithm="ps") for n in ready)),
        "one-bucket": Plan("bsp-ps", (Bucket(tuple(ready), algorithm="ps"),)),
        "chunked-prio": Plan("bytescheduler-ps",
                             tuple(Bucket((n,), chunks=2, priority=len(ready) - i,
                                          algorithm="ps") for i, n in enumerate(ready)),
                             update="per_layer"),
    }


def _cases() -> list[dict]:
    cases = []
    for model in ("mlp", "frozen", "branchy"):
        for opt in ("sgd", "adamw"):
            for shape, plan in _plans(model).items():
                cases.append({"id": f"{model}-{opt}-{shape}", "model": model,
                              "optimizer": opt, "plan": plan.to_dict(), "steps": STEPS,
                              "batch": BATCH, "find_unused": model in PER_SHARD})
    return cases


CASES = _cases()


def _launch(servers: int, cases: list[dict], die: list[int] | None = None,
            op_timeout_s: float = 60) -> list[dict]:
    from gradsched.distributed import LaunchSpec, launch

    payload = {"cases": cases, "workers": WORKERS, "timeout_s": op_timeout_s, "die": die}
    return launch("gradsched.runtime.tasks:ps_exactness_cases", payload,
                  LaunchSpec(WORKERS + servers, op_timeout_s=op_timeout_s, deadline_s=300))


@pytest.fixture(scope="module", params=[1, 2], ids=["2w1s", "2w2s"])
def run(request) -> tuple[int, list[dict]]:
    return request.param, _launch(request.param, CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_ps_matches_full_batch_reference(run, case):
    _, results = run
    ref = train_single(case["model"], case["optimizer"], WORKERS, STEPS, BATCH)
    got = results[0]["cases"][case["id"]]["params"]
    assert set(got) == set(ref)
    for name, values in got.items():
        torch.testing.assert_close(torch.tensor(values), ref[name].reshape(-1), atol=ATOL,
                                   rtol=RTOL, msg=lambda m, name=name: f"{name}: {m}")
    assert results[1]["cases"][case["id"]]["params"] == got
    init = dict(make_test_model(case["model"]).named_parameters())
    moved = max(float((torch.tensor(v) - init[n].detach().reshape(-1)).abs().max())
                for n, v in got.items())
    assert moved > 100 * ATOL  # the comparison is not vacuous: training moved the weights


def test_servers_serve_their_round_robin_share(run):
    servers, results = run
    for case in CASES:
        plan = Plan.from_dict(case["plan"])
        n_parts = sum(b.chunks for b in plan.buckets)
        served = [results[WORKERS + s]["served"][case["id"]] for s in range(servers)]
        expect = [len(range(s, n_parts, servers)) * STEPS for s in range(servers)]
        assert served == expect, case["id"]
        for w in range(WORKERS):
            assert results[w]["cases"][case["id"]]["stats"][-1]["bucket_launches"] == \
                [b.chunks for b in plan.buckets]


@pytest.mark.parametrize("victim", [2, 1], ids=["dead-server", "dead-worker"])
def test_dead_peer_ends_every_rank(victim):
    from gradsched.distributed import DistributedError

    start = time.monotonic()
    with pytest.raises(DistributedError, match=f"rank {victim}"):
        _launch(1, CASES[:1], die=[victim, 1 if victim < WORKERS else 0], op_timeout_s=20)
    assert time.monotonic() - start < 120


def test_schedule_sizes_order_and_servers():
    numel = {"a": 10, "b": 7}
    plan = Plan("p", (Bucket(("a",), chunks=3, algorithm="ps"),
                      Bucket(("b",), algorithm="ps")))
    sched = partition_schedule(plan, numel, servers=2)
    assert [(p.bucket, p.chunk, p.numel, p.server) for p in sched] == \
        [(0, 0, 4, 0), (0, 1, 4, 1), (0, 2, 4, 0), (1, 0, 7, 1)]
    flagged = partition_schedule(plan, numel, servers=1, find_unused=True)
    assert [p.numel for p in flagged] == [4, 4, 4, 8]  # one used-flag per member


def test_bad_ps_plans_and_layouts_are_refused():
    with pytest.raises(ConfigError, match="every bucket"):
        partition_schedule(Plan("p", (Bucket(("a",)),)), {"a": 3}, 1)
    with pytest.raises(ConfigError, match="all_reduce"):
        partition_schedule(Plan("p", (Bucket(("a",), "rs_ag", algorithm="ps"),)), {"a": 3}, 1)
    with pytest.raises(ConfigError, match="server"):
        PSLayout(2, 0)


def _tiny_ps_plan(path, algorithm: str = "ps") -> None:
    from gradsched.runtime.coverage import model_parameters

    ready = list(model_parameters("tiny-mlp", 4, None))[::-1]
    Plan("wfbp-ps", tuple(Bucket((n,), algorithm=algorithm) for n in ready)).save(path)


def test_run_cli_times_a_ps_plan(tmp_path):
    import pandas as pd

    from gradsched.cli import main

    _tiny_ps_plan(tmp_path / "ps.json")
    out = tmp_path / "m.csv"
    rc = main(["run", "--plan", str(tmp_path / "ps.json"), "--model", "tiny-mlp",
               "--batch-size", "4", "--world-size", "2", "--ps-servers", "2", "--iters", "3",
               "--warmup", "1", "-o", str(out)])
    assert rc == 0
    rows = pd.read_csv(out)
    assert len(rows) == 3 and (rows["iteration_s"] > 0).all()
    assert set(rows["world_size"]) == {2}  # the workers


def test_run_cli_refuses_mismatched_ps_options(tmp_path, capsys):
    from gradsched.cli import main

    _tiny_ps_plan(tmp_path / "ps.json")
    _tiny_ps_plan(tmp_path / "flat.json", algorithm="default")
    base = ["run", "--model", "tiny-mlp", "--batch-size", "4", "--world-size", "2",
            "-o", str(tmp_path / "m.csv")]
    assert main([*base, "--plan", str(tmp_path / "ps.json")]) != 0
    assert "--ps-servers" in capsys.readouterr().err
    assert main([*base, "--plan", str(tmp_path / "flat.json"), "--ps-servers", "1"]) != 0
    assert "must be 'ps'" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()


def test_as_ps_plan_keeps_buckets_and_makes_them_push_pull():
    from gradsched.runtime.ps import as_ps_plan

    plan = Plan("bsp-ps", (Bucket(("a", "b"), "rs_ag", chunks=3, priority=0),),
                update="per_layer")
    out = as_ps_plan(plan)
    assert out.buckets[0].tensors == ("a", "b") and out.buckets[0].chunks == 3
    assert out.buckets[0].collective == "all_reduce" and out.buckets[0].algorithm == "ps"
    assert out.update == "per_layer"
    assert len(partition_schedule(out, {"a": 5, "b": 4}, 2)) == 3
