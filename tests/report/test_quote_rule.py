"""The one rule for what a quoted number may rest on (:mod:`gradsched.report.quote_rule`):
planted rows in and out of the domain, host-bound, extrapolated, synthetic and uncalibrated;
and every quoted maximum, median, minimum and range macro rests only on rows that pass it
(changing the rows it leaves out changes no quoted number).

Inputs are small SYNTHETIC replay tables made here (never committed as measurements)."""

from __future__ import annotations

import pandas as pd
import pytest

from gradsched.report import calibrated, gpu_generations, replay
from gradsched.report.quote_rule import (
    REASONS,
    calibrated_links,
    exclusion_reasons,
    link_of,
    quotable,
    quotable_cases,
)
from tests.report.test_collect import synthetic_collected

LINKS = frozenset({"tbf1gbit"})


def planted_row(**changes: object) -> dict:
    row = {"trace": "toy", "network": "net", "comm_file": "net-p8", "world_size": 8,
           "algorithm": "wfbp", "iteration_s": 1.0, "comm_below_range_pct": 0.0,
           "comm_above_range_pct": 0.0, "compute_bound_by": "unknown",
           "extrapolated": False}
    return row | changes


@pytest.mark.parametrize(("changes", "reason"), [
    ({}, ""),
    ({"comm_above_range_pct": 49.0}, ""),                     # half inside: still in
    ({"comm_above_range_pct": 30.0, "comm_below_range_pct": 30.0}, "outside"),
    ({"comm_below_range_pct": 80.0}, "outside"),
    ({"compute_bound_by": "host"}, "host-bound"),
    ({"compute_bound_by": "device"}, ""),
    ({"extrapolated": True}, "extrapolated"),
    ({"extrapolated": "True"}, "extrapolated"),               # as read back from a CSV
    ({"synthetic": True}, "synthetic"),
    ({"comm_file": "gloo-tbf1gbit-p4"}, "uncalibrated"),      # a calibrated link, any P
    ({"comm_file": "gloo-tbf100mbit-p2"}, ""),                # no calibration for that link
    # the first reason in REASONS wins
    ({"extrapolated": True, "compute_bound_by": "host", "comm_above_range_pct": 90.0},
     "extrapolated"),
    ({"compute_bound_by": "host", "comm_file": "gloo-tbf1gbit-p2"}, "host-bound"),
    ({"comm_file": "gloo-tbf1gbit-p2", "comm_above_range_pct": 90.0}, "uncalibrated"),
])
def test_the_rule_on_planted_rows(changes: dict, reason: str) -> None:
    frame = pd.DataFrame([planted_row(), planted_row(**changes)])
    reasons = exclusion_reasons(frame, LINKS)
    assert reasons.iloc[0] == ""
    assert reasons.iloc[1] == reason
    assert bool(quotable(frame, LINKS).iloc[1]) == (reason == "")
    assert reason == "" or reason in REASONS


def test_rows_without_the_columns_pass_and_links_are_read_from_case_names() -> None:
    frame = pd.DataFrame({"algorithm": ["wfbp"], "iteration_s": [1.0]})
    assert exclusion_reasons(frame, LINKS).tolist() == [""]
    assert link_of("gloo-tbf1gbit-p2") == link_of("tbf1gbit-p3") == "tbf1gbit"
    runs = pd.DataFrame({"case": ["a/tbf1gbit-p2", "b/loopback-p3"]})
    assert calibrated_links(runs) == {"tbf1gbit", "loopback"}
    assert calibrated_links(None) == frozenset()


def test_a_case_is_quotable_only_when_every_compared_row_passes() -> None:
    frame = pd.DataFrame([planted_row(), planted_row(algorithm="mgwfbp"),
                          planted_row(world_size=16, comm_file="net-p16"),
                          planted_row(world_size=16, comm_file="net-p16", algorithm="mgwfbp",
                                      comm_above_range_pct=90.0),
                          planted_row(world_size=32, comm_file="net-p32")])
    cases = quotable_cases(frame, ["world_size"], ["wfbp", "mgwfbp"])
    assert cases.to_dict() == {8: True, 16: False, 32: False}  # 32: no MG-WFBP row


# --- every quoted number rests only on rows that pass the rule ---------------------------

QUOTED_SUFFIXES = ("MaxPct", "MedianPct", "MinPct", "MaxSpeedupOverWfbp",
                   "MaxSpeedupOverWfbpAlgorithm", "MaxSpeedupOverWfbpTrace",
                   "MaxSpeedupOverWfbpNetwork", "MaxSpeedupOverWfbpWorldSize",
                   "MaxSpeedupOverWfbpCase")
"""Macros that quote a maximum, median, minimum or range (or where the maximum is)."""


def quoted(values: dict[str, str]) -> dict[str, str]:
    """The quoted maxima, medians, minima and ranges of ``values``; the headline (quoted with
    its domain beside it) and the scope labelled ``Extrap`` are not."""
    return {k: v for k, v in values.items()
            if k.endswith(QUOTED_SUFFIXES) and not k.startswith("Headline")
            and "Extrap" not in k}


def planted_collected() -> pd.DataFrame:
    """A V100 family of four measured cases with DDP and the contiguous optimum, plus one
    case of each kind the rule leaves out, each with the most extreme times of the table."""
    base = synthetic_collected().assign(family="v100", comm_below_range_pct=0.0,
                                        comm_above_range_pct=0.0, compute_bound_by="unknown",
                                        extrapolated=False)
    extra = [base[base["algorithm"] == "best"].assign(algorithm=alg, iteration_s=lambda f, s=s:
                                                         f["iteration_s"] * s)
             for alg, s in (("ddp", 1.15), ("contiguous_optimum", 1.04))]
    data = pd.concat([base, *extra], ignore_index=True)
    data["exposed_comm_s"] = data["iteration_s"] - data["compute_s"]
    one = data[(data["network"] == "net-a") & (data["world_size"] == 8)]
    planted = [one.assign(network="net-out", comm_above_range_pct=90.0),
               one.assign(network="net-host", compute_bound_by="host"),
               one.assign(network="net-a", world_size=512, extrapolated=True),
               one.assign(network="cpu-gloo-1gbit", comm_file="gloo-tbf1gbit-p8")]
    return pd.concat([data, *planted], ignore_index=True)


def perturb(frame: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    """Scale the time of the masked rows by an algorithm-dependent factor (so every ratio
    among them and against the others moves)."""
    out = frame.copy()
    factor = out["algorithm"].map({"wfbp": 3.0, "ddp": 2.5}).fillna(1.7)
    hit = mask.to_numpy(dtype=bool)
    out.loc[hit, "iteration_s"] = out.loc[hit, "iteration_s"] * factor[hit]
    out.loc[hit, "exposed_comm_s"] = out.loc[hit, "iteration_s"] - out.loc[hit, "compute_s"]
    return out


def all_quoted(frame: pd.DataFrame) -> dict[str, str]:
    return quoted(replay.replay_macros(frame, replay.Headline(), LINKS)
                  | gpu_generations.gpu_generation_macros(frame, ("v100",), LINKS))


def test_every_quoted_replay_number_rests_only_on_rows_that_pass_the_rule() -> None:
    data = planted_collected()
    left_out = ~quotable(data, LINKS)
    assert set(exclusion_reasons(data, LINKS)) == {"", "outside", "host-bound",
                                                    "extrapolated", "uncalibrated"}
    before = all_quoted(data)
    after = all_quoted(perturb(data, left_out))
    assert before == after
    # the macros quote numbers (the test is not vacuous) ...
    assert before["MaxSpeedupOverWfbp"] != "n/a"
    assert before["GenVOneZeroZeroDdpExposedMedianPct"] != "n/a"
    assert before["MgwfbpContigGapMaxPct"] != "n/a"
    # ... and perturbing the rows the rule keeps moves them
    assert all_quoted(perturb(data, ~left_out)) != before


def test_a_family_with_no_row_inside_the_rule_quotes_no_median() -> None:
    data = planted_collected().assign(comm_above_range_pct=90.0)
    values = gpu_generations.gpu_generation_macros(data, families=("v100",))
    assert values["GenVOneZeroZeroNumQuoted"] == "0"
    assert values["GenVOneZeroZeroDdpExposedMedianPct"] == "n/a"
    assert values["GenVOneZeroZeroBestGainMaxPct"] == "n/a"


def calibrated_runs() -> pd.DataFrame:
    rows = []
    for case, times, above in (
            ("a/tbf1gbit-p2", {"wfbp": 1.2, "mgwfbp": 1.1, "search": 1.0,
                               "contiguous_optimum": 1.05}, {}),
            ("b/tbf1gbit-p3", {"wfbp": 1.3, "mgwfbp": 1.0, "search": 1.01,
                               "contiguous_optimum": 1.0}, {}),
            # mostly priced above the sweep's largest size: its extremes must not count
            ("c/tbf100mbit-p2", {"wfbp": 3.0, "mgwfbp": 1.0, "search": 2.0,
                                 "contiguous_optimum": 0.5}, {"mgwfbp": 95.0})):
        for alg, t in times.items():
            rows.append({"case": case, "algorithm": alg, "iteration_s": t,
                         "comm_below_range_pct": 0.0, "comm_above_range_pct": above.get(alg, 0.0)})
    return pd.DataFrame(rows)


def test_the_calibrated_ranges_and_maximum_rest_only_on_cases_inside_the_rule() -> None:
    runs = calibrated_runs()
    values = calibrated.calibrated_gap_macros(runs)
    assert values["CalibratedNumCases"] == "3" and values["CalibratedNumQuoted"] == "2"
    assert values["CalibratedMgwfbpSearchGapMinPct"] == "-1.0"
    assert values["CalibratedMgwfbpSearchGapMaxPct"] == "10.0"
    assert values["CalibratedMaxSpeedupOverWfbp"] == "1.30"
    assert values["CalibratedMaxSpeedupOverWfbpAlgorithm"] == "MG-WFBP = Contig-opt"
    moved = perturb(runs.assign(exposed_comm_s=0.0, compute_s=0.0), ~quotable(runs))
    assert quoted(calibrated.calibrated_gap_macros(moved)) == quoted(values)


def test_the_figures_draw_the_rows_the_rule_leaves_out_differently(tmp_path) -> None:
    """``report figure gpu-generations|gaps --calibrated-link``: naming the planted CPU
    link a calibrated one turns its points hollow (another PDF)."""
    from gradsched.cli import main

    data = tmp_path / "collected.csv"
    planted_collected().to_csv(data, index=False)
    for verb in ("gpu-generations", "gaps"):
        pdfs = []
        for extra in ([], ["--calibrated-link", "tbf1gbit"]):
            out = tmp_path / f"{verb}{len(extra)}.pdf"
            assert main(["report", "figure", verb, "--input", str(data), "-o", str(out),
                         *extra]) == 0
            pdfs.append(out.read_bytes())
        assert pdfs[0] != pdfs[1], verb
