"""The macros of trace facts the prose quotes (report/trace_facts.py) and of the token
bucket's burst (report/burst.py): recomputed here from the frames by hand.

Inputs are SYNTHETIC traces made here (never committed as measurements)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from gradsched.cli import main
from gradsched.report import burst, latex, paper_macros, trace_facts
from gradsched.report.latex import NA
from gradsched.report.tuned_caps import tuned_cap_macros
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

STEM = "resnet50-b2-cpu-fp32"
KEY = "TraceResnetFiveZeroBTwoCpuFpThreeTwo"


def _trace(stem: str = STEM, **meta):
    trace = synthetic_compute_trace(6, seed=3)
    return dataclasses.replace(trace, path=f"traces/{stem}.csv", meta={**trace.meta, **meta})


def _sweep(rate_Bps: float, cluster_rate: str, busbw: list[float] | None = None):
    sweep = synthetic_comm_trace([32768, 65536, 131072], world_size=2)
    frame = sweep.frame.assign(collective=["all_gather", "all_reduce", "all_reduce"])
    if busbw is not None:
        frame = frame.assign(busbw_Bps=busbw)
    meta = {**sweep.meta, "line_rate_Bps": rate_Bps, "settings": {"cluster_rate": cluster_rate}}
    return dataclasses.replace(sweep, frame=frame, meta=meta)


def test_trace_facts_are_the_trace_sums() -> None:
    trace = _trace(iteration_nohooks_s=0.87)
    sweeps = [_sweep(1.25e8, "1gbit"), _sweep(1.25e7, "100mbit")]
    out = trace_facts.trace_fact_macros([trace], sweeps, stems=(STEM,))
    total = int(trace.frame["bytes"].sum())
    assert out[f"{KEY}Tensors"] == "6"
    assert out[f"{KEY}GradMB"] == f"{total / 1e6:.0f}"
    assert out[f"{KEY}LargestTensorMiB"] == f"{trace.frame['bytes'].max() / 2**20:.0f}"
    assert out[f"{KEY}IterationS"] == "0.9"
    assert out[f"{KEY}WireTbfOnegbitS"] == f"{total / 1.25e8:.1f}"
    assert out[f"{KEY}WireTbfOneZeroZerombitS"] == f"{total / 1.25e7:.1f}"


def test_trace_facts_without_data_are_na() -> None:
    """A missing trace, a sidecar without the hook-free iteration and a link without a
    sweep give n/a, never a number."""
    out = trace_facts.trace_fact_macros([_trace()], [], stems=(STEM, "other"))
    assert out[f"{KEY}IterationS"] == NA
    assert out[f"{KEY}WireTbfOnegbitS"] == NA
    assert out["TraceOtherTensors"] == NA
    assert out["TraceOtherGradMB"] == NA


def test_link_rates_come_from_the_sidecars() -> None:
    rates = trace_facts.link_rates([_sweep(1.25e7, "100mbit"), synthetic_comm_trace([8])])
    assert rates == {"tbf100mbit": 1.25e7}


def test_burst_is_the_peak_bus_bandwidth_row() -> None:
    """The reviewer's case: the peak row is a 32 KiB all-gather, not a 64 KiB all-reduce."""
    sweep = _sweep(1.25e7, "100mbit", busbw=[30.13e6, 12.75e6, 12.0e6])
    out = burst.burst_macros(sweep)
    assert out == {"BurstBusbwMBps": "30.1", "BurstCollective": "all-gather",
                   "BurstSize": r"32\,KiB", "BurstLinkMBps": "12.5"}


def test_burst_without_data_is_na() -> None:
    assert set(burst.burst_macros(None).values()) == {NA}
    assert set(burst.burst_macros(_sweep(1.25e7, "100mbit")).values()) == {NA}


def test_size_text() -> None:
    assert burst.size_text(32768) == r"32\,KiB"
    assert burst.size_text(3 * 2**20) == r"3\,MiB"
    assert burst.size_text(1000) == r"1000\,B"


def test_every_new_macro_is_written_without_data() -> None:
    """The names the prose uses exist even with no input (n/a), as the paper test needs."""
    names = paper_macros.all_macros()
    for stem in trace_facts.PROSE_TRACES:
        assert names[f"Trace{latex.camel(stem)}Tensors"] == NA
    assert names["BurstBusbwMBps"] == NA


def test_cli_writes_the_trace_facts(tmp_path: Path) -> None:
    trace, sweep = _trace(), _sweep(1.25e8, "1gbit", busbw=[3e6, 2e6, 1e6])
    trace.save(tmp_path / f"{STEM}.csv")
    sweep.save(tmp_path / "sweep.csv")
    out = tmp_path / "m.tex"
    assert main(["report", "macros", "--compute-trace", str(tmp_path / f"{STEM}.csv"),
                 "--sweep", str(tmp_path / "sweep.csv"),
                 "--burst-sweep", str(tmp_path / "sweep.csv"), "-o", str(out)]) == 0
    values = latex.parse_macros(out.read_text())
    assert values[f"{KEY}GradMB"] == f"{trace.frame['bytes'].sum() / 1e6:.0f}"
    assert values["BurstBusbwMBps"] == "3.0"
    assert values["BurstCollective"] == "all-gather"


def test_tuned_caps_range_over_communication_bound_cases() -> None:
    stats = pd.DataFrame({
        "case": ["a-tbf1gbit", "b-tbf100mbit", "c-tbf1gbit", "d-loopback", "all"],
        "bandwidth": ["tbf1gbit", "tbf100mbit", "tbf1gbit", "loopback", "loopback,tbf1gbit"],
        "tuned_ddp": ["ddp-native-5", "ddp-native-1", "ddp-native-default", "ddp-native-50",
                      None],
    })
    assert tuned_cap_macros(stats) == {"ReexecTunedCapMinMB": "1", "ReexecTunedCapMaxMB": "25"}
    assert set(tuned_cap_macros(None).values()) == {NA}
