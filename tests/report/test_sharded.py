"""The sharded table: one row per case and planner, speedup over FSDP2's defaults.

The rows are SYNTHETIC (hand-made), not measurements."""

from __future__ import annotations

import pandas as pd

from gradsched.report.formatting import fmt
from gradsched.report.sharded import HEADER, MIB, sharded_table


def rows() -> pd.DataFrame:
    base = {"compute": "m", "network": "n", "world_size": 2, "semantics": "blocking",
            "n_units": 4, "forward_prefetch": 1, "backward_prefetch": 1,
            "reshard_after_forward": True, "compute_s": 1.0, "gathered_peak_bytes": 2**21,
            "resident_bytes": 2**22, "n_collectives": 9, "lower_bound_s": 1.5}
    return pd.DataFrame([
        base | {"algorithm": "fsdp2", "iteration_s": 3.0, "exposed_comm_s": 2.0},
        base | {"algorithm": "sharded-optimum", "iteration_s": 2.0, "exposed_comm_s": 1.0,
                "reshard_after_forward": False},
    ])


def test_speedup_is_over_the_fsdp2_default_of_the_same_case() -> None:
    table, align = sharded_table(rows())
    assert list(table.columns) == HEADER and len(align) == len(HEADER)
    assert table["vs FSDP2 [x]"].tolist() == ["1.000", "1.500"]
    assert table["peak [MiB]"].tolist() == ["2", "2"]
    assert table["above bound [%]"].tolist() == ["100.0", "33.3"]


def test_an_empty_input_gives_an_empty_table() -> None:
    table, _ = sharded_table(pd.DataFrame())
    assert table.empty and list(table.columns) == HEADER


def measured_rows() -> pd.DataFrame:
    """SYNTHETIC rows of gradsched shard measure (arithmetic only)."""
    base = {"model": "m", "batch_size": 4, "world_size": 2, "network": "loopback",
            "n_units": 3, "reshard_after_forward": True, "forward_prefetch": 1,
            "backward_prefetch": 1, "units_match": True, "predicted_peak_bytes": 2**20,
            "measured_p10_s": 0.9, "measured_p90_s": 1.1, "iters": 9,
            "compute_only_s": 0.5}
    return pd.DataFrame([
        base | {"algorithm": "fsdp2", "predicted_s": 1.1, "measured_s": 1.0,
                "error_pct": 10.0, "predicted_raw_s": 1.6, "error_raw_pct": 60.0,
                "compute_scale": 0.6, "speedup_vs_fsdp2": 1.0, "speedup_low": 1.0,
                "speedup_high": 1.0},
        base | {"algorithm": "sharded-optimum", "predicted_s": 0.7, "measured_s": 0.8,
                "error_pct": -12.5, "predicted_raw_s": 1.2, "error_raw_pct": 50.0,
                "compute_scale": 0.6, "speedup_vs_fsdp2": 1.25, "speedup_low": 1.1,
                "speedup_high": 1.4, "units_match": False},
    ])


def test_measured_table_and_macros() -> None:
    from gradsched.report.sharded import (
        MEASURED_HEADER,
        sharded_measured_macros,
        sharded_measured_table,
    )

    table, align = sharded_measured_table(measured_rows())
    assert list(table.columns) == MEASURED_HEADER and len(align) == len(MEASURED_HEADER)
    assert table["vs FSDP2 [x]"].tolist()[1] == "1.25 [1.10, 1.40]"
    assert table["units as planned"].tolist() == ["yes", "no"]
    macros = sharded_measured_macros(measured_rows())
    assert macros["ShardedMeasuredCases"] == "1" and macros["ShardedMeasuredPlans"] == "2"
    assert macros["ShardedMedianAbsErrPct"] == "11.2"  # median of 10 and 12.5
    assert macros["ShardedMedianAbsErrRawPct"] == "55.0"
    assert macros["ShardedComputeScaleMin"] == "0.60"
    assert macros["ShardedRawOverPredicted"] == "2"
    assert table["unscaled error [%]"].tolist() == ["60.0", "50.0"]
    assert macros["ShardedOptVsDefaultFasterCases"] == "1"
    assert macros["ShardedOptVsDefaultSlowerCases"] == "0"
    # rows measured before the no-reshard baseline and the memory column: n/a, not a number
    assert macros["ShardedOptVsNoReshardMin"] == "n/a"
    assert macros["ShardedOptMeasPeakOverDefaultMax"] == "n/a"
    missing = fmt(float("nan"))
    assert table["vs no reshard [x]"].tolist() == [missing, missing]
    assert table["peak meas. [MiB]"].tolist() == [missing, missing]
    assert macros["ShardedUnitsMatchPlans"] == "1"
    # above the 0.5 s control: predicted 0.6 vs measured 0.5 (+20 %), 0.2 vs 0.3 (-33 %)
    assert macros["ShardedMedianAbsExcessErrPct"] == "27"
    assert macros["ShardedMaxAbsExcessErrPct"] == "33"
    assert macros["ShardedExcessUndefined"] == "0"
    assert sharded_measured_macros(None)["ShardedMeasuredCases"] == "n/a"


def measured_rows_with_baselines() -> pd.DataFrame:
    """SYNTHETIC rows with both baselines, the capped optimum and measured peaks (two
    cases; arithmetic only)."""
    base = measured_rows().iloc[0].to_dict() | {"units_match": True}
    out = []
    for network, scale in (("loopback", 1.0), ("tbf1gbit", 2.0)):
        for name, speed, vs_nr, pred, meas in (
                ("fsdp2", 1.0, 0.8, 100, 300), ("fsdp2-noreshard", 1.25, 1.0, 150, 360),
                ("sharded-optimum", 1.3 * scale, 1.04, 160, 372),
                ("sharded-optimum-capped", 1.01, 0.81, 100, 290)):
            out.append(base | {"network": network, "algorithm": name,
                               "speedup_vs_fsdp2": speed, "speedup_low": speed - 0.05,
                               "speedup_high": speed + 0.05,
                               "speedup_vs_noreshard": vs_nr,
                               "speedup_vs_noreshard_low": vs_nr - 0.05,
                               "speedup_vs_noreshard_high": vs_nr + 0.05,
                               "predicted_peak_bytes": pred * MIB,
                               "measured_peak_bytes": meas * MIB})
    return pd.DataFrame(out)


def test_macros_compare_with_both_baselines_and_peaks() -> None:
    from gradsched.report.sharded import sharded_measured_macros

    macros = sharded_measured_macros(measured_rows_with_baselines())
    assert macros["ShardedMeasuredCases"] == "2"
    assert macros["ShardedNoReshardVsDefaultMin"] == "1.25"
    assert (macros["ShardedOptVsDefaultMin"], macros["ShardedOptVsDefaultMax"]) == \
        ("1.30", "2.60")
    assert macros["ShardedOptVsNoReshardMax"] == "1.04"
    assert macros["ShardedOptVsNoReshardFasterCases"] == "0"  # 1.04 - 0.05 < 1
    assert macros["ShardedCappedVsNoReshardSlowerCases"] == "2"
    assert macros["ShardedCappedVsDefaultCases"] == "2"
    assert macros["ShardedOptPredPeakOverDefaultMax"] == "1.60"
    assert macros["ShardedOptMeasPeakOverDefaultMin"] == "1.24"
    assert macros["ShardedCappedPredPeakOverDefaultMax"] == "1.00"
    assert macros["ShardedNoReshardMeasPeakOverDefaultMax"] == "1.20"


def test_measured_table_shows_both_baselines_and_both_peaks() -> None:
    from gradsched.report.sharded import MEASURED_HEADER, sharded_measured_table

    table, align = sharded_measured_table(measured_rows_with_baselines())
    assert list(table.columns) == MEASURED_HEADER and len(align) == len(MEASURED_HEADER)
    first = table.iloc[:4]
    assert first["plan"].tolist() == ["FSDP2 default", "FSDP2 default, no reshard",
                                      "optimum", "optimum, FSDP2's peak"]
    assert first["vs no reshard [x]"].tolist()[2] == "1.04 [0.99, 1.09]"
    assert first["peak pred. [MiB]"].tolist() == ["100.0", "150.0", "160.0", "100.0"]
    assert first["peak meas. [MiB]"].tolist() == ["300.0", "360.0", "372.0", "290.0"]
