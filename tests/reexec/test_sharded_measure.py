"""The sharded re-execution: plans made, predicted, run with stock FSDP2 and compared with
FSDP2's defaults. The compute trace here is SYNTHETIC (made for tiny-mlp's parameter
names); the timings are real runs of tiny-mlp on two gloo ranks."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.reexec.sharded import (
    ShardedCase,
    measure,
    plans_for,
    read_iterations,
    rederived_speedups,
    replicates,
    speedups,
)
from gradsched.replay.sharded import replay_sharded
from gradsched.runtime.rounds import Timing
from gradsched.traces import ComputeTrace

META = {"kind": "compute", "model": "tiny-mlp", "batch_size": 4, "device": "cpu",
        "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
        "iterations": None, "date": "2026-11-26",
        "source": "SYNTHETIC test fixture, not measured"}


def tiny_mlp_trace() -> ComputeTrace:
    """SYNTHETIC: tiny-mlp's six tensors (Linear 64-128-128-10) with made-up times."""
    shapes = {"0.weight": 64 * 128, "0.bias": 128, "2.weight": 128 * 128, "2.bias": 128,
              "4.weight": 128 * 10, "4.bias": 10}
    names = list(shapes)
    frame = pd.DataFrame({"name": names, "layer": [0, 0, 1, 1, 2, 2],
                          "numel": [shapes[n] for n in names],
                          "bytes": [4 * shapes[n] for n in names],
                          "forward_s": 1e-4, "backward_s": 2e-4, "update_s": 1e-5,
                          "ready_order": [5, 4, 3, 2, 1, 0]})
    return ComputeTrace.from_frame(frame, META)


def test_speedup_is_the_ratio_of_medians_with_a_within_round_interval() -> None:
    """SYNTHETIC iterations (labelled): two rounds of each plan."""
    times = {"fsdp2": [2.0, 2.1, 1.9, 2.0], "sharded-optimum": [1.0, 1.1, 0.9, 1.0]}
    rows = [{"algorithm": name, "round": i // 2, "iteration": i, "iteration_s": t}
            for name, values in times.items() for i, t in enumerate(values)]
    reps = replicates("c", rows, list(times))
    out = speedups(reps, "sharded-optimum")
    assert out["speedup_vs_fsdp2"] == pytest.approx(2.0)
    assert out["speedup_low"] <= out["speedup_vs_fsdp2"] <= out["speedup_high"]
    assert speedups(reps, "fsdp2")["speedup_low"] == 1.0  # a plan against itself: exactly 1
    assert math.isnan(out["speedup_vs_noreshard"])  # fsdp2-noreshard did not run
    # deterministic: seeded by the case and the plans
    assert replicates("c", rows, list(times)).medians["fsdp2"].tolist() == \
        reps.medians["fsdp2"].tolist()


def test_the_baseline_must_be_measured() -> None:
    with pytest.raises(ConfigError, match="fsdp2"):
        plans_for(tiny_mlp_trace(), AlphaBetaModel(1e-4, 1e-9), 2, ["sharded-optimum"], None)


@pytest.mark.slow
def test_measure_runs_every_plan_and_checks_its_units() -> None:
    case = ShardedCase("tiny-mlp", 4, 2, "loopback", None)
    names = ["fsdp2", "fsdp2-noreshard", "sharded-optimum", "sharded-optimum-capped"]
    timing = Timing(model="tiny-mlp", batch_size=4, rounds=2, warmup=1, iters=2, timeout_s=60,
                    memory=True)
    rows, iterations, plans = measure(case, tiny_mlp_trace(), AlphaBetaModel(1e-4, 1e-9),
                                      names, timing)
    assert [r["algorithm"] for r in rows] == names
    assert all(r["units_match"] and r["iters"] == 4 and r["measured_s"] > 0 for r in rows)
    assert rows[0]["speedup_vs_fsdp2"] == pytest.approx(1.0)
    assert rows[1]["speedup_vs_noreshard"] == pytest.approx(1.0)
    assert len(plans) == 4
    assert [r["algorithm"] for r in iterations].count("compute-only") == 4
    assert len(iterations) == 20
    assert sorted({r["round"] for r in iterations}) == [0, 1]  # the bootstrap's strata
    # every interval is the project's one bootstrap, recomputable from the iterations
    reps = replicates(case.name, iterations, names)
    for row in rows:
        again = speedups(reps, row["algorithm"])
        assert (row["speedup_low"], row["speedup_high"]) == (again["speedup_low"],
                                                             again["speedup_high"])
    # the prediction is the replay on the trace scaled to the control of the same launch
    control = sorted(r["iteration_s"] for r in iterations if r["algorithm"] == "compute-only")
    trace = tiny_mlp_trace()
    compute_s = trace.forward_total_s + trace.backward_total_s + trace.update_total_s
    for row in rows:
        assert row["compute_only_s"] == pytest.approx((control[1] + control[2]) / 2)
        assert row["compute_scale"] == pytest.approx(row["compute_only_s"] / compute_s)
        assert row["predicted_s"] != pytest.approx(row["predicted_raw_s"])
        assert row["error_pct"] == pytest.approx(100 * (row["predicted_s"] / row["measured_s"]
                                                        - 1))
    # measured peak memory: every plan's and the control's, positive; the control (full
    # gradients of every parameter on every rank) holds at least the model's gradients
    assert all(r["measured_peak_bytes"] > 0 for r in rows)
    assert rows[0]["compute_only_peak_bytes"] >= int(trace.frame["bytes"].sum())
    # the capped optimum stays within the baseline's predicted peak; the uncapped need not
    assert rows[3]["predicted_peak_bytes"] <= rows[0]["predicted_peak_bytes"]
    assert plans[3].knobs["memory_cap_bytes"] == pytest.approx(rows[0]["predicted_peak_bytes"])
    assert not any(u.reshard_after_forward for u in plans[1].units)
    assert [u.tensors for u in plans[1].units] == [u.tensors for u in plans[0].units]


def test_the_capped_optimum_is_capped_at_the_baselines_predicted_peak() -> None:
    """SYNTHETIC trace: the uncapped optimum keeps units gathered above FSDP2's peak; the
    capped item stays within it and is labelled as such."""
    trace, model = tiny_mlp_trace(), AlphaBetaModel(1e-3, 1e-9)
    plans = plans_for(trace, model, 2, ["fsdp2", "fsdp2-noreshard", "sharded-optimum",
                                        "sharded-optimum-capped"], None)
    peaks = [replay_sharded(trace, p, model, 2, semantics="blocking").gathered_peak_bytes
             for p in plans]
    assert [p.algorithm for p in plans] == ["fsdp2", "fsdp2-noreshard", "sharded-optimum",
                                            "sharded-optimum-capped"]
    assert peaks[2] > peaks[0] >= peaks[3]
    assert plans[3].knobs["memory_cap_bytes"] == peaks[0]


@pytest.mark.parametrize("case", ["resnet18-b4-p2-loopback", "mobilenet_v2-b8-p2-tbf1gbit"])
def test_committed_cases_load_and_their_speedups_rederive(repo, case) -> None:
    """The committed iterations (written before the round column) still load; the
    re-derived point estimates are the committed ones, only the intervals' method
    changes (within rounds now)."""
    folder = repo / "paper" / "data" / "sharded" / case
    rows = read_iterations(folder)
    assert {r["round"] for r in rows} == {0, 1, 2}  # 3 rounds x 3 iterations per plan
    again = rederived_speedups(folder)
    committed = pd.read_csv(folder / "measured.csv")
    assert again["algorithm"].tolist() == committed["algorithm"].tolist()
    for column in ("speedup_vs_fsdp2", "speedup_vs_noreshard"):
        assert again[column].to_numpy() == pytest.approx(committed[column].to_numpy(),
                                                         rel=1e-7)
    assert (again["speedup_low"] <= again["speedup_vs_fsdp2"]).all()
    assert (again["speedup_vs_fsdp2"] <= again["speedup_high"]).all()
