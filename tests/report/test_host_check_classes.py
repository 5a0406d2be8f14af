"""The host-check table's rows per class of GPU busy share: both replays' median |error|
and where the host-aware replay is worse (a SYNTHETIC frame, made up here)."""

from __future__ import annotations

import pandas as pd

from gradsched.report.host_check import classes, host_check_table


def test_classes_use_the_one_host_bound_threshold_and_count_worse_cases() -> None:
    frame = pd.DataFrame({  # SYNTHETIC
        "config": ["a", "b", "c", "d"], "gpu_busy_share": [0.2, 0.79, 0.9, 0.97],
        "kernel_ms": 1.0, "host_ms": 1.0, "measured_ms": 1.0, "single_stream_ms": 1.0,
        "host_aware_ms": 1.0, "single_stream_error_pct": [-60.0, -10.0, -5.0, -4.0],
        "host_aware_error_pct": [30.0, 20.0, 25.0, 18.0], "host_excess_us_per_launch": 0.0})
    (host, n_host, s_host, h_host, w_host), middle, (busy, n_busy, _, h_busy, w_busy) = (
        classes(frame))
    assert host.startswith("busy < 0.8") and n_host == 2 and w_host == 1
    assert s_host == 35.0 and h_host == 25.0
    assert middle[1] == 1 and middle[4] == 1
    assert busy == "busy >= 0.95" and n_busy == 1 and h_busy == 18.0 and w_busy == 1
    table, _ = host_check_table(frame)
    assert table["configuration"].iloc[-1] == "median, busy >= 0.95 (1)"
    assert table["host - measured (us/launch)"].iloc[-1] == "1 of 1 worse"


def test_host_check_macros_state_both_replays() -> None:
    from gradsched.report.host_check import HOST_CHECK_KEYS, host_check_macros

    frame = pd.DataFrame({  # SYNTHETIC
        "config": ["a_b", "c", "d"], "gpu_busy_share": [0.2, 0.96, 0.97],
        "single_stream_error_pct": [-60.0, -4.0, -2.0],
        "host_aware_error_pct": [30.0, 18.0, -1.0]})
    out = host_check_macros(frame)
    assert out["HostCheckSingleMedianErr"] == "4.0" and out["HostCheckHostAwareMedianErr"] == "18.0"
    assert out["HostCheckHostAwareWorse"] == "1" and out["HostCheckBusyConfigs"] == "2"
    assert out["HostCheckBusyWorstConfig"] == "c"
    assert out["HostCheckBusyWorstSingleErr"] == "-4.0"
    assert out["HostCheckBusyWorstHostAwareErr"] == "+18.0"
    assert out["HostCheckHostBoundShare"] == "0.8"
    empty = host_check_macros(None)  # every name, n/a without data
    assert set(empty) == set(HOST_CHECK_KEYS) and empty["HostCheckConfigs"] == "n/a"
