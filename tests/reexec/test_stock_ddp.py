"""Stock DDP with a plan's buckets against the baselines, and best's gain split into
implementation and schedule, on SYNTHETIC measured rows and iterations (arithmetic only,
never measurements)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from gradsched.reexec.analysis import analyze
from gradsched.reexec.stock_ddp import STOCK_DDP_COLUMNS, stock_ddp_comparison
from gradsched.report.reexec import AnalysisOutputs, write_analysis
from gradsched.report.stock_ddp import NOT_MEASURED, stock_ddp_table

# SYNTHETIC medians (s): the list item 10 % faster than DDP's default, etc.
TIMES = {"ddp-native-default": 1.10, "ddp-native-25": 1.12, "ddp-native-5": 1.05,
         "ddp-native-1": 1.30, "ddp-list-contiguous_optimum": 1.00, "best": 0.95,
         "ddp": 1.00, "wfbp": 1.20, "compute-only": 0.50}


def _kind(alg: str) -> str:
    if alg == "compute-only":
        return "control"
    return "ddp-native" if alg.startswith("ddp-native") else (
        "ddp-list" if alg.startswith("ddp-list") else "plan")


def synthetic(cases: dict[str, dict[str, float]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SYNTHETIC measured.csv rows and iterations (2 rounds x 5 iterations around each
    median, +-1 %)."""
    rows, its = [], []
    for case, times in cases.items():
        for alg, t in times.items():
            rows.append({"case": case, "bandwidth": "tbf1gbit", "world_size": 2,
                         "algorithm": alg, "kind": _kind(alg), "item": alg,
                         "predicted_s": t, "predicted_interference_s": t,
                         "predicted_raw_s": t, "measured_s": t, "measured_p10_s": t * 0.99,
                         "measured_p90_s": t * 1.01,
                         "ddp_buckets_match": True if alg.startswith("ddp-list") else None})
            for r in range(2):
                for k, f in enumerate((0.99, 0.995, 1.0, 1.005, 1.01)):
                    its.append({"case": case, "item": alg, "round": r, "iteration": k,
                                "iteration_s": t * f})
    return pd.DataFrame(rows), pd.DataFrame(its)


def test_ratios_and_intervals():
    without_list = {k: v for k, v in TIMES.items() if not k.startswith("ddp-list")}
    frame, its = synthetic({"c1-b2-p2-tbf1gbit": TIMES, "c2-b2-p2-tbf1gbit": without_list})
    out = stock_ddp_comparison(frame, its)
    assert list(out.columns) == list(STOCK_DDP_COLUMNS)
    assert len(out) == 2
    c1, c2 = out.iloc[0], out.iloc[1]
    assert c1["list_algorithm"] == "ddp-list-contiguous_optimum"
    assert c1["tuned_ddp"] == "ddp-native-5"  # the fastest explicit cap, not the default
    assert c1["ddp_buckets_match"] is True
    expect = {"default_over_list": 1.10 / 1.00, "tuned_over_list": 1.05 / 1.00,
              "best_over_list": 0.95 / 1.00, "default_over_best": 1.10 / 0.95,
              "executor_ddp_over_best": 1.00 / 0.95, "default_over_executor_ddp": 1.10}
    for name, value in expect.items():
        assert math.isclose(c1[name], value, rel_tol=1e-9), name
        assert c1[f"{name}_lo"] <= c1[name] <= c1[f"{name}_hi"], name
    # implementation x schedule = the whole gain of best over PyTorch DDP
    assert math.isclose(c1["default_over_executor_ddp"] * c1["executor_ddp_over_best"],
                        c1["default_over_best"], rel_tol=1e-12)
    # no list item: its columns empty, the decomposition still there
    assert c2["list_algorithm"] == "" and math.isnan(c2["default_over_list"])
    assert math.isclose(c2["default_over_best"], 1.10 / 0.95, rel_tol=1e-9)
    # deterministic: the same intervals again
    again = stock_ddp_comparison(frame, its)
    assert np.array_equal(again["default_over_list_lo"].to_numpy(),
                          out["default_over_list_lo"].to_numpy(), equal_nan=True)


def test_point_estimates_without_iterations():
    frame, _ = synthetic({"c1": TIMES})
    row = stock_ddp_comparison(frame).iloc[0]
    assert math.isclose(row["default_over_list"], 1.10)
    assert math.isnan(row["default_over_list_lo"])


def test_table_says_not_measured_and_the_analyze_outputs(tmp_path):
    without_list = {k: v for k, v in TIMES.items() if not k.startswith("ddp-list")}
    frame, its = synthetic({"resnet18-b4-p2-tbf1gbit": TIMES,
                            "mobilenet_v2-b8-p2-tbf1gbit": without_list})
    table, align = stock_ddp_table(stock_ddp_comparison(frame, its))
    assert len(align) == len(table.columns)
    first, second = table.iloc[0], table.iloc[1]
    assert first["DDP default / list"].startswith("1.10 [")
    assert first["tuned cap / list (cap)"].endswith("(5 MB)")
    assert first["rebuilt as planned"] == "yes"
    assert (second.iloc[1:6] == NOT_MEASURED).all()
    assert second["DDP default / best"].startswith("1.16 [")
    measured, iterations = tmp_path / "measured.csv", tmp_path / "iterations.csv"
    frame.to_csv(measured, index=False)
    its.to_csv(iterations, index=False)
    write_analysis(analyze(measured, iterations), AnalysisOutputs(
        stock_ddp_tex=tmp_path / "s.tex", stock_ddp_md=tmp_path / "s.md",
        md=tmp_path / "errors.md"))
    # the per-plan error table names the list row after its plan, between plans and DDP
    lines = [line.split(" | ")[0] for line in
             (tmp_path / "errors.md").read_text().splitlines() if line.startswith("| ")]
    listed = lines.index("| PyTorch DDP, Contig-opt buckets")
    assert lines.index("| Best") < listed < lines.index("| PyTorch DDP default")
    md = (tmp_path / "s.md").read_text()
    assert "| ResNet-18 b4, P=2, 1 Gbit/s | Contig-opt | yes | 1.10 [" in md
    assert NOT_MEASURED in md and "\\begin{tabular}" in (tmp_path / "s.tex").read_text()


def test_committed_data_has_no_list_rows_yet(repo):
    """The committed measurement predates the ddp-list item: the table must still build."""
    data = repo / "paper" / "data" / "reexec"
    frame = pd.read_csv(data / "measured.csv")
    out = stock_ddp_comparison(frame)
    assert len(out) == frame["case"].nunique()
    if not (frame["kind"] == "ddp-list").any():
        assert (out["list_algorithm"] == "").all()
        assert (stock_ddp_table(out)[0]["DDP default / list"] == NOT_MEASURED).all()
