"""Bootstrap intervals and rank agreement of the re-execution experiment.

All data here is synthetic (labelled): iteration times drawn from known distributions."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gradsched.reexec import uncertainty


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
