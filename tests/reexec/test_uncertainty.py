"""Bootstrap intervals and machine-load accounting of the re-execution experiment.

All data here is synthetic (labelled): iteration times drawn from known distributions."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gradsched.reexec import load, uncertainty


def _iterations(medians: dict[str, float], *, rounds: int = 3, iters: int = 7,
                noise: float = 0.02, seed: int = 0) -> pd.DataFrame:
    """Synthetic iterations: item -> lognormal times around its median."""
    rng = np.random.default_rng(seed)
    rows = []
    for item, med in medians.items():
        for r in range(rounds):
            for i in range(iters):
                rows.append({"case": "c", "item": item, "round": r, "iteration": i,
                             "iteration_s": med * math.exp(rng.normal(0, noise))})
    return pd.DataFrame(rows)


def _runs(pred: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"case": "c", "algorithm": list(pred), "item": list(pred),
                         "predicted_s": list(pred.values())})


def test_interval_covers_the_true_median_about_95_percent():
    hits = 0
    for seed in range(200):
        reps = uncertainty.bootstrap_medians(_iterations({"a": 1.0}, seed=seed), "c", ["a"],
                                             n_boot=400)
        lo, hi = reps.interval("a")
        hits += lo <= 1.0 <= hi
    assert 0.85 <= hits / 200 <= 1.0  # percentile bootstrap of a median: near 95 %


def test_intervals_are_deterministic_and_shrink_with_more_iterations():
    small = uncertainty.bootstrap_medians(_iterations({"a": 1.0}, iters=3), "c", ["a"])
    again = uncertainty.bootstrap_medians(_iterations({"a": 1.0}, iters=3), "c", ["a"])
    assert np.array_equal(small.medians["a"], again.medians["a"])
    big = uncertainty.bootstrap_medians(_iterations({"a": 1.0}, iters=40), "c", ["a"])
    width = lambda r: np.subtract(*reversed(r.interval("a")))  # noqa: E731
    assert width(big) < width(small)


def test_a_perfect_model_ranks_separated_plans_right():
    truth = {"p1": 1.0, "p2": 1.1, "p3": 1.2, "p4": 1.3, "ddp-native-default": 1.25,
             "ddp-native-5": 1.05, "best": 0.95}
    its = _iterations(truth, noise=0.01)
    unc = uncertainty.case_uncertainty(_runs(truth), its, {k: k for k in truth})
    s = unc.stats
    assert s["n_separated_pairs"] == s["n_pairs"] == 21
    assert s["tau"] == pytest.approx(1.0) and s["tau_separated"] == pytest.approx(1.0)
    assert s["tau_lo"] > 0.8
    assert s["tuned_ddp"] == "ddp-native-5"
    assert s["best_vs_ddp_default_speedup"] == pytest.approx(1.25 / 0.95, rel=0.02)
    assert s["best_vs_ddp_default_speedup_lo"] > 1.2
    assert s["best_vs_ddp_tuned_speedup"] == pytest.approx(1.05 / 0.95, rel=0.02)
    assert s["spread_to_noise"] > 10
    plans = unc.plans.set_index("item")
    assert (plans["measured_lo_s"] < plans["measured_s"]).all()
    assert (plans["error_lo_pct"] <= plans["error_pct"]).all()
    assert (plans["error_pct"] <= plans["error_hi_pct"]).all()


def test_a_reversed_model_scores_minus_one_and_noise_hides_order():
    truth = {"a": 1.0, "b": 1.2, "c": 1.4}
    reversed_pred = {"a": 1.4, "b": 1.2, "c": 1.0}
    its = _iterations(truth, noise=0.01)
    s = uncertainty.case_uncertainty(_runs(reversed_pred), its, {k: k for k in truth}).stats
    assert s["tau"] == pytest.approx(-1.0) and s["tau_separated"] == pytest.approx(-1.0)
    close = {"a": 1.0, "b": 1.001, "c": 1.002}  # differences far inside the noise
    s = uncertainty.case_uncertainty(_runs(close), _iterations(close, noise=0.05),
                                     {k: k for k in close}).stats
    assert s["n_separated_pairs"] == 0 and math.isnan(s["tau_separated"])
    assert s["spread_to_noise"] < 1


def test_missing_item_is_an_error():
    with pytest.raises(ValueError, match="no iterations of item 'x'"):
        uncertainty.bootstrap_medians(_iterations({"a": 1.0}), "c", ["a", "x"])


def test_foreign_cores_subtracts_the_ranks_own_cpu(tmp_path):
    start = load.CpuSample(100.0, 0.0, 10.0)
    end = load.CpuSample(104.0, 0.0, 12.0)  # 4 busy CPU-seconds in 2 s
    assert load.foreign_cores(start, end, ranks_cpu_s=3.5) == pytest.approx(0.25)
    assert load.foreign_cores(start, end, ranks_cpu_s=5.0) == 0.0  # never negative
    assert load.foreign_cores(load.CpuSample(None, 0, 0), end, 1.0) is None


def test_machine_busy_reads_proc_stat_format(tmp_path):
    stat = tmp_path / "stat"
    hz = __import__("os").sysconf("SC_CLK_TCK")
    stat.write_text(f"cpu  {hz} 0 {hz} 5000 7 0 0 0 0 0\ncpu0 1 2 3\n")
    assert load.machine_busy_s(stat) == pytest.approx(2.0)
    stat.write_text("garbage\n")
    assert load.machine_busy_s(stat) is None
    assert load.machine_busy_s(tmp_path / "missing") is None


def test_a_busy_loop_is_seen_as_foreign_load():
    import subprocess
    import sys

    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = load.busy_cores(1.0)
    finally:
        hog.kill()
        hog.wait()
    assert busy is not None and busy > 0.5


def test_summary_table_rows_and_intervals():
    from gradsched.report.reexec import reexec_summary_table

    stats = pd.DataFrame([{
        "case": "resnet50-b2-p2-tbf1gbit", "world_size": 2, "bandwidth": "tbf1gbit",
        "spread_to_noise": 12.34, "tau_int": 0.81, "tau_int_lo": 0.6, "tau_int_hi": 0.9,
        "n_separated_pairs": 30, "n_pairs": 45, "tau_separated": 0.93,
        "median_abs_err_int_pct": 3.21, "best_vs_ddp_default_speedup": 1.12,
        "best_vs_ddp_default_speedup_lo": 1.08, "best_vs_ddp_default_speedup_hi": 1.15,
        "best_vs_ddp_tuned_speedup": 1.01, "best_vs_ddp_tuned_speedup_lo": 0.98,
        "best_vs_ddp_tuned_speedup_hi": 1.04, "tuned_ddp": "ddp-native-5",
        "n_flagged_runs": 0}, {"case": "all", "world_size": "2", "bandwidth": "x"}])
    table, align = reexec_summary_table(stats)
    assert len(table) == 1 and len(align) == len(table.columns)
    row = table.iloc[0].tolist()
    assert row[:2] == ["ResNet-50 b2, P=2, 1 Gbit/s", "12.3"]
    assert row[2] == "0.81 [0.60, 0.90]" and row[3] == "30/45"
    assert row[6] == "1.12 [1.08, 1.15]" and row[7] == "1.01 [0.98, 1.04] (5 MB)"


def test_boot_macros_count_cases_against_the_targets():
    from gradsched.report.macros import reexec_boot_macros

    def row(case, net, default, tuned_hi, sep):
        return {"case": case, "bandwidth": net, "n_separated_pairs": sep, "n_pairs": 10,
                "order_ok_separated_pct": 100.0, "tau_separated": 1.0, "tau_int_lo": 0.5,
                "spread_to_noise": 5.0, "best_vs_ddp_default_speedup": default,
                "best_vs_ddp_tuned_speedup": 1.0, "best_vs_ddp_tuned_speedup_hi": tuned_hi,
                "n_flagged_runs": 1, "foreign_cpu_cores_max": 0.3}

    stats = pd.DataFrame([row("a", "tbf1gbit", 1.12, 1.01, 4),
                          row("b", "tbf100mbit", 1.05, 0.97, 6),
                          row("c", "loopback", 1.20, 0.90, 0),
                          row("all", "x", math.nan, math.nan, math.nan)])
    m = reexec_boot_macros(stats)
    assert m["ReexecSepPairs"] == "10" and m["ReexecAllPairs"] == "30"
    assert m["ReexecBestTenPctCases"] == "2"  # loopback counts for the 1.10x target too
    assert m["ReexecCommCases"] == "2" and m["ReexecBestNotSlowerTunedCases"] == "1"
    assert m["ReexecFlaggedRuns"] == "3"
    assert reexec_boot_macros(None)["ReexecSepPairs"] == "n/a"
