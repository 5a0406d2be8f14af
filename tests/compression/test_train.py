"""The real training experiment (gradsched.compression.train) end to end on 2 gloo ranks
(a few steps), its summary statistics, the report functions and the committed results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from gradsched.compression.train import (
    CURVE_COLUMNS,
    SUMMARY_COLUMNS,
    TrainSettings,
    digits_split,
    run_experiment,
    summarize,
)
from gradsched.report.compression import density_label, summary_table, write_all

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "paper" / "data" / "compression"


def test_digits_split_is_fixed() -> None:
    x_tr, _, x_te, y_te = digits_split()
    assert x_tr.shape == (1437, 64) and x_te.shape == (360, 64)
    again = digits_split()
    assert (again[3] == y_te).all() and (again[0] == x_tr).all()
    assert abs(float(x_tr.mean())) < 1e-4


@pytest.mark.slow
def test_small_run_end_to_end(tmp_path: Path) -> None:
    settings = TrainSettings(world_size=2, methods=("dense", "topk", "importance"),
                             densities=(1 / 16,), seeds=(0,), steps=6, eval_every=3,
                             batch_per_rank=16)
    out = run_experiment(settings, tmp_path, deadline_s=80)
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert list(curves.columns) == CURVE_COLUMNS
    assert sorted(curves["step"].unique()) == [0, 3, 6]
    assert curves["test_accuracy"].between(0, 1).all()
    trained = curves[curves["step"] > 0]
    assert (trained["wallclock_s"] > 0).all()
    # measured bytes equal the formula (the task raises otherwise) and are what we expect:
    # MLP 64-128-64-10 in 3 buckets of 8320, 8256, 650 elements
    numels = [8320, 8256, 650]
    dense = trained.loc[trained["method"] == "dense", "bytes_sent"]
    assert (dense == 4 * sum(numels)).all()
    ks = [math.ceil(n / 16) for n in numels]
    assert (trained.loc[trained["method"] == "topk", "bytes_sent"] == 8 * sum(ks)).all()
    assert (trained.loc[trained["method"] == "importance", "bytes_sent"] == 8 * sum(ks)).all()
    recv = trained.groupby("method")["bytes_received"].first()
    assert recv["dense"] == 4 * sum(numels)
    assert recv["topk"] == 2 * 8 * sum(ks)  # all-gather output: P = 2 times the input
    assert recv["importance"] == 8 * sum(ks)
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary.columns) == SUMMARY_COLUMNS
    ratio = summary.set_index("method")["compression_ratio"]
    assert ratio["dense"] == pytest.approx(1.0)
    assert ratio["topk"] == pytest.approx(4 * sum(numels) / (8 * sum(ks)))
    meta = json.loads((tmp_path / "settings.json").read_text())
    assert meta["settings"]["world_size"] == 2
    assert len(meta["measured"]["runs"]) == 3
    assert len(out["summary"]) == 3
    # figures and table from these results
    paths = write_all(tmp_path, tmp_path / "fig", tmp_path / "tab")
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    md = (tmp_path / "tab" / "compression-summary.md").read_text()
    assert "importance-weighted" in md and "1/16" in md


def test_summarize_mean_std_and_ratio() -> None:
    rows = []
    for seed, acc in enumerate([0.9, 0.8]):
        for method, density, nbytes in (("dense", 1.0, 400), ("topk", 0.25, 100)):
            rows.append({"method": method, "density": density, "seed": seed, "step": 0,
                         "wallclock_s": 0.0, "train_loss": math.nan, "test_accuracy": 0.1,
                         "bytes_sent": 0, "bytes_received": 0})
            rows.append({"method": method, "density": density, "seed": seed, "step": 10,
                         "wallclock_s": 2.0, "train_loss": 0.5, "test_accuracy": acc,
                         "bytes_sent": nbytes, "bytes_received": 2 * nbytes})
    s = summarize(pd.DataFrame(rows, columns=CURVE_COLUMNS)).set_index("method")
    assert s.loc["topk", "final_accuracy_mean"] == pytest.approx(0.85)
    assert s.loc["topk", "final_accuracy_std"] == pytest.approx(0.0707107, rel=1e-5)
    assert s.loc["topk", "compression_ratio"] == pytest.approx(4.0)
    assert s.loc["topk", "bytes_received_per_step"] == pytest.approx(200.0)
    assert s.loc["dense", "time_per_step_s_mean"] == pytest.approx(0.2)
    table, _ = summary_table(s.reset_index())
    assert table.iloc[1]["final test accuracy [%]"] == "85.00 ± 7.07"
    assert density_label(1 / 256) == "1/256"


def test_committed_results_are_consistent() -> None:
    curves_csv, summary_csv = COMMITTED / "curves.csv", COMMITTED / "summary.csv"
    if not curves_csv.is_file():
        pytest.skip("no committed compression results")
    curves = pd.read_csv(curves_csv)
    summary = pd.read_csv(summary_csv)
    assert list(curves.columns) == CURVE_COLUMNS
    # the committed summary is what summarize() makes of the committed curves
    again = summarize(curves)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), summary, check_exact=False,
                                  rtol=1e-6, check_dtype=False)
    meta = json.loads((COMMITTED / "settings.json").read_text())
    assert meta["settings"]["world_size"] >= 2
    assert set(curves["method"]) >= {"dense", "topk", "importance"}
    assert curves.groupby(["method", "density"])["seed"].nunique().min() >= 3
