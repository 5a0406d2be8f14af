"""The paper's maxima and medians stay inside the data: replay rows whose communication was
mostly priced outside the measured message sizes, and host-bound GPU traces, are left out of
them and counted; the re-execution's error is quoted with the plain replay's next to it.

Inputs are small SYNTHETIC result tables made here (never committed as measurements)."""

from __future__ import annotations

import pandas as pd

from gradsched.reexec.analysis import case_stats
from gradsched.report import calibrated, gpu_generations, reexec, replay
from gradsched.report.collect import outside_domain_mask
from tests.report.test_collect import synthetic_collected


def with_domain(frame: pd.DataFrame, below: float = 0.0) -> pd.DataFrame:
    return frame.assign(comm_below_range_pct=below, comm_above_range_pct=0.0,
                        world_size_basis="measured")


def test_a_mostly_extrapolated_case_does_not_set_the_maximum() -> None:
    data = with_domain(synthetic_collected())
    inside = replay.replay_macros(data, replay.Headline())
    # a new case whose WFBP is 10x slower, but priced 57 % below the sweep's smallest size
    outlier = data[(data["network"] == "net-a") & (data["world_size"] == 8)].assign(
        network="net-c")
    outlier.loc[outlier["algorithm"] == "wfbp", "iteration_s"] *= 10
    outlier.loc[outlier["algorithm"] == "wfbp", "comm_below_range_pct"] = 57.5
    both = pd.concat([data, outlier], ignore_index=True)
    assert outside_domain_mask(both).sum() == 1
    values = replay.replay_macros(both, replay.Headline())
    assert values["MaxSpeedupOverWfbp"] == inside["MaxSpeedupOverWfbp"]
    assert values["NumCasesOutsideDomain"] == "1" and values["NumRowsOutsideDomain"] == "1"
    assert values["NumReplayCases"] == "5"  # still replayed and tabled
    assert replay.max_speedup_macros(both)["MaxSpeedupOverWfbpNetwork"] != "net-c"


def test_rows_without_shares_are_not_marked() -> None:
    assert not outside_domain_mask(synthetic_collected()).any()


def test_host_bound_cases_are_left_out_of_the_family_medians() -> None:
    data = with_domain(synthetic_collected()).assign(family="h200")
    data = data[data["algorithm"].isin(["ddp", "best", "wfbp"])]
    ddp = data[data["algorithm"] == "best"].assign(algorithm="ddp")
    ddp["iteration_s"] *= 1.1
    data = pd.concat([data, ddp], ignore_index=True).assign(compute_bound_by="device")
    hot = (data["network"] == "net-b") & (data["world_size"] == 16)
    data.loc[hot & (data["algorithm"] == "ddp"), "iteration_s"] *= 3  # a huge "gain"
    data.loc[hot, "compute_bound_by"] = "host"
    values = gpu_generations.gpu_generation_macros(data, families=("h200",))
    assert values["GenHTwoZeroZeroNumHostBound"] == "1"
    assert values["GenHTwoZeroZeroNumCases"] == "3"
    assert values["GenHTwoZeroZeroBestGainMaxPct"] == "10.0"


def test_the_plain_replay_error_is_quoted_next_to_the_calibrated_one() -> None:
    measured = pd.DataFrame({
        "case": ["c"] * 2, "kind": ["plan", "plan"], "measured_s": [1.0, 2.0],
        "predicted_raw_s": [1.2, 1.8], "compute_scale": [0.5, 0.5]})
    measured = measured.assign(
        model="m", batch_size=1, world_size=2, bandwidth="loopback", algorithm="a",
        item=["a", "b"], predicted_s=[1.0, 2.0], predicted_interference_s=[1.0, 2.0],
        predicted_dynamic_s=[1.0, 2.0], measured_p10_s=[0.9, 1.9], measured_p90_s=[1.1, 2.1],
        update="global")
    values = reexec.reexec_macros(case_stats(measured), measured)
    assert values["ReexecMedianErrRaw"] == "15.0"
    assert values["ReexecComputeScaleMin"] == values["ReexecComputeScaleMax"] == "0.50"


def test_the_replay_table_marks_rows_outside_the_domain_and_host_bound_computes() -> None:
    from gradsched.report.replay import OUTSIDE_MARK, replay_table

    data = with_domain(synthetic_collected()).assign(compute_bound_by="device")
    hit = (data["network"] == "net-b") & (data["world_size"] == 16)
    data.loc[hit & (data["algorithm"] == "wfbp"), "comm_below_range_pct"] = 80.0
    data.loc[hit, "compute_bound_by"] = "host"
    table, _ = replay_table(data)
    marked = table["WFBP [ms]"].str.endswith(OUTSIDE_MARK)
    assert marked.sum() == 1 and bool(marked[table["network"].eq("net-b")
                                            & table["P [ranks]"].eq("16")].all())
    assert table["compute"].str.endswith("(host)").sum() == 1


def test_host_bound_rows_and_the_headline_domain() -> None:
    data = with_domain(synthetic_collected()).assign(compute_bound_by="device")
    hot = data[(data["network"] == "net-a") & (data["world_size"] == 8)].assign(
        network="net-h", compute_bound_by="host")
    hot.loc[hot["algorithm"] == "wfbp", "iteration_s"] *= 10
    data.loc[data["algorithm"] == "mgwfbp", "comm_above_range_pct"] = 65.7
    both = pd.concat([data, hot], ignore_index=True)
    values = replay.replay_macros(both, replay.Headline(network="net-b", world_size=16))
    assert values["NumCasesHostBound"] == "1"
    assert values["MaxSpeedupOverWfbp"] == replay.replay_macros(
        data, replay.Headline())["MaxSpeedupOverWfbp"]
    assert values["HeadlineMgwfbpAboveRangePct"] == "66"
    assert values["NumRowsMostlyAbove"] == "4" and values["NumRowsMostlyBelow"] == "0"


def test_the_calibrated_gap_counts_cases_priced_outside_the_domain() -> None:
    rows = [{"case": case, "algorithm": alg, "iteration_s": t,
             "comm_below_range_pct": 0.0,
             "comm_above_range_pct": 90.0 if (case, alg) == ("b", "mgwfbp") else 0.0}
            for case in ("a", "b")
            for alg, t in (("mgwfbp", 1.1), ("search", 1.0), ("contiguous_optimum", 1.05))]
    values = calibrated.calibrated_gap_macros(pd.DataFrame(rows))
    assert values["CalibratedNumCases"] == "2"
    assert values["CalibratedNumOutsideDomain"] == "1"
