"""The one timing protocol: every kind of item (executor plan, stock DDP with a cap and with
a cap list, an FSDP2 plan, the compute-only control) timed in seeded interleaved rounds,
each run sampled for load.

The in-process tests run the rank side on a one-rank gloo group (the tiny MLP, real
iterations); the launch test runs two gloo ranks on loopback."""

from __future__ import annotations

import math
import socket

import pytest

pytest.importorskip("torch")

from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.run_order import round_order, run_order
from gradsched.runtime import rounds
from gradsched.runtime.records import check_records
from gradsched.runtime.rounds import Item, Timing

MLP = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")  # tiny-mlp


def every_kind() -> list[Item]:
    ready = MLP[::-1]
    plan = Plan("wfbp", tuple(Bucket((n,)) for n in ready))
    sharded = ShardedPlan("two-units", (Unit(MLP[0:2]), Unit(MLP[2:6])), backward_prefetch=1)
    return [Item("plan-wfbp", "plan", plan=plan.to_dict()),
            Item("ddp-25", "ddp", bucket_cap_mb=25.0),
            Item("ddp-list", "ddp-list", bucket_cap_mb_list=[0.05, 1.0]),
            Item("fsdp2", "fsdp2", plan=sharded.to_dict()),
            Item("control", "control")]


@pytest.fixture(scope="module")
def one_rank_group():
    """A one-rank gloo process group in this process (closed after the module)."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def test_items_and_counts_are_checked_before_any_rank_starts() -> None:
    with pytest.raises(ConfigError, match="kind"):
        Item("x", "allreduce")
    with pytest.raises(ConfigError, match="needs its plan"):
        Item("x", "fsdp2")
    with pytest.raises(ConfigError, match="bucket_cap_mb_list"):
        Item("x", "ddp-list")
    timing = Timing(model="tiny-mlp", batch_size=4, warmup=0)
    with pytest.raises(ConfigError, match="warmup >= 1"):
        rounds.check_counts([Item("x", "ddp-list", bucket_cap_mb_list=[1.0])], timing)
    with pytest.raises(ConfigError, match="FSDP2"):
        rounds.check_counts(every_kind()[3:4], timing)
    with pytest.raises(ConfigError, match="nothing to run"):
        rounds.check_counts([], timing)


def test_every_round_runs_every_item_once_in_its_seeded_order(one_rank_group) -> None:
    """The order is run_order's (not the items' order): interleaved, every item -- the
    control included -- once per round, each run timed and sampled for load."""
    items = every_kind()
    timing = Timing(model="tiny-mlp", batch_size=4, rounds=3, warmup=1, iters=2, seed=5)
    runs = rounds.rank_runs(0, 1, items, timing)
    assert [r["item"] for r in runs] == run_order(len(items), 3, seed=5)
    assert [r["item"] for r in runs] != list(range(len(items))) * 3
    for r in range(3):
        mine = [run for run in runs if run["round"] == r]
        assert [run["item"] for run in mine] == round_order(len(items), r, seed=5)
        assert [run["position"] for run in mine] == list(range(len(items)))
    control = [run for run in runs if items[run["item"]].kind == "control"]
    assert [run["round"] for run in control] == [0, 1, 2]
    for run in runs:
        assert len(run["times"]) == 2 and min(run["times"]) > 0
        assert run["wall"][1] > run["wall"][0] and run["cpu_s"] > 0
        assert run["load"] >= 0 and run["started_at"].endswith("Z")
    by_kind = {items[run["item"]].kind: run for run in runs}
    assert by_kind["plan"]["n_collectives"] == len(MLP)  # wfbp: one per tensor
    assert by_kind["ddp-list"]["rebuilt_buckets"] is not None
    assert by_kind["fsdp2"]["unit_tensors"] == [sorted(MLP[0:2]), sorted(MLP[2:6])]
    assert by_kind["control"]["n_collectives"] is None
    # what the launcher reads back: every kind's records pass its checks
    mine = [{"rank": 0, "runs": runs}]
    assert check_records(mine, items=len(items), rounds=3, iters=2, workers=1) == mine


def test_every_kind_runs_k_micro_batches_per_step(one_rank_group) -> None:
    """--grad-accum 2: every kind (the executor, stock DDP with a cap and a cap list, FSDP2,
    ZeRO-1 with and without overlap_with_ddp, the control) runs 2 micro-batches in every
    warm-up and timed iteration; ZeRO-1's own warm-up steps, run while its runner is built,
    are not counted."""
    bucket = (Bucket(MLP[::-1]),)
    items = [*every_kind(),
             *(Item(f"zero1-{opt}", "zero1", plan=Plan("zero1", bucket, optimizer=opt).to_dict())
               for opt in ("sharded", "bucket_owner"))]
    timing = Timing(model="tiny-mlp", batch_size=4, rounds=1, warmup=1, iters=2,
                    grad_accum=2)
    rounds.check_counts(items, timing)  # ZeRO-1 accumulates too
    runs = rounds.rank_runs(0, 1, items, timing)
    assert {items[run["item"]].key: run["micro_batches"] for run in runs} == {
        item.key: 2 * 3 for item in items}
    results = [{"runs": runs}]
    assert [rounds.micro_batches_per_step(results, j, timing) for j in range(len(runs))] \
        == [2.0] * len(runs)
    with pytest.raises(ConfigError, match="parameter servers"):
        rounds.check_counts(items[:1], Timing(model="tiny-mlp", batch_size=4, grad_accum=2,
                                              ps_servers=1))


def test_an_fsdp2_item_keeps_parameters_unsharded_as_its_plan_says(one_rank_group,
                                                                    monkeypatch) -> None:
    """The runner passes the plan's keep_unsharded_between_microbatches to FSDP2's
    accumulation context (what that context does on real ranks:
    tests/runtime/test_grad_accum.py)."""
    from dataclasses import replace

    from gradsched.runtime import runners

    seen = []
    original = runners.fsdp2_silence

    def spy(model, keep_unsharded=False):
        seen.append(keep_unsharded)
        return original(model, keep_unsharded)
    monkeypatch.setattr(runners, "fsdp2_silence", spy)
    plan = ShardedPlan.from_dict(every_kind()[3].plan)
    items = [Item("plain", "fsdp2", plan=plan.to_dict()),
             Item("kept", "fsdp2",
                  plan=replace(plan, keep_unsharded_between_microbatches=True).to_dict())]
    timing = Timing(model="tiny-mlp", batch_size=4, rounds=1, warmup=1, iters=1,
                    grad_accum=2)
    runs = rounds.rank_runs(0, 1, items, timing)
    assert sorted(seen) == [False, True]
    assert all(run["micro_batches"] == 4 for run in runs)


def test_memory_peak_is_sampled_on_request(one_rank_group) -> None:
    items = [Item("control", "control")]
    timing = Timing(model="tiny-mlp", batch_size=4, rounds=1, warmup=1, iters=1, memory=True)
    (run,) = rounds.rank_runs(0, 1, items, timing)
    assert run["peak_bytes"] > 0


def test_launcher_side_keeps_the_slowest_rank_and_the_foreign_cores() -> None:
    """SYNTHETIC rank records."""
    results = [{"runs": [{"item": 0, "times": [1.0, 3.0], "cpu_s": 1.0, "busy": [10.0, 14.0],
                          "wall": [0.0, 2.0]}]},
               {"runs": [{"item": 0, "times": [2.0, 1.0], "cpu_s": 2.5, "busy": [0, 0],
                          "wall": [0, 0]}]}]
    assert rounds.slowest(results, 0, 2) == [2.0, 3.0]
    assert rounds.foreign_cores_of(results, 0) == pytest.approx(0.25)  # (4 - 3.5) / 2 s
    results[0]["runs"][0]["busy"] = [None, None]
    assert math.isnan(rounds.foreign_cores_of(results, 0))
    assert rounds.runs_of(results, 0) == [0]


@pytest.mark.slow
def test_two_ranks_time_every_kind_in_the_same_order() -> None:
    items = every_kind()
    timing = Timing(model="tiny-mlp", batch_size=4, rounds=2, warmup=1, iters=2, seed=1,
                    timeout_s=60)
    launched = rounds.launch_rounds(items, timing, rounds.Launch(world_size=2))
    orders = [[run["item"] for run in r["runs"]] for r in launched.results]
    assert orders[0] == orders[1] == run_order(len(items), 2, seed=1)
    for k in range(len(items)):
        assert len(rounds.runs_of(launched.results, k)) == 2
    list_runs = [r["runs"][j]["rebuilt_buckets"] for r in launched.results
                 for j in rounds.runs_of(launched.results, 2)]
    assert len(list_runs) == 4 and all(b == list_runs[0] for b in list_runs)  # every rank
    assert sorted(t for b in list_runs[0] for t in b) == sorted(MLP)
