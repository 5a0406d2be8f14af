"""Macros that give a claim its scope: the architectures' rounds that the measurement does
not order, the CPU captures' negative hook overheads, the largest speed-up over WFBP at
measured vs extrapolated world sizes.

Inputs are SYNTHETIC rows made here (never committed as measurements)."""

from __future__ import annotations

import pandas as pd

from gradsched.report import architectures, captures, replay
from tests.report.test_collect import synthetic_collected


def _run(kind: str, rate: str, median: float, spread: float, rnd: int) -> dict:
    return {"algorithm": "ddp", "bandwidth": rate, "layout": "2x2", "median_s": median,
            "p10_s": median - spread, "p90_s": median + spread, "predicted_iteration_s": 1.0,
            "plan_file": f"x/ddp-{kind}.plan.json", "workers": 4, "round": rnd}


def test_architecture_rounds_in_opposite_orders() -> None:
    runs = [_run("flat", "1gbit", 4.85, 0.3, 1), _run("hierarchical", "1gbit", 4.69, 0.2, 1),
            _run("flat", "1gbit", 4.65, 0.1, 2), _run("hierarchical", "1gbit", 4.71, 0.1, 2),
            _run("flat", "100mbit", 8.4, 0.2, 1), _run("hierarchical", "100mbit", 6.9, 0.2, 1)]
    m = architectures.architecture_macros(runs)
    assert m["ArchHierFlatOnegbitRounds"] == "2"
    assert m["ArchHierFlatOnegbitRoundsBelowOne"] == "1"  # the rounds disagree
    assert m["ArchHierFlatOnegbitRoundsOverlap"] == "2"
    assert m["ArchHierFlatOneZeroZerombitRoundsOverlap"] == "0"
    assert m["ArchHierFlatOneZeroZerombitRoundsBelowOne"] == "1"


def test_cpu_capture_hook_overhead_signs() -> None:
    inv = pd.DataFrame({"kind": ["compute"] * 4 + ["comm"],
                        "hook_overhead_pct": [-2.0, -0.5, 1.5, 4.0, 99.0]})
    m = captures.cpu_capture_macros(inv)
    assert m["CaptureCpuNumTraces"] == "4" and m["CaptureCpuHookNegativeTraces"] == "2"
    assert m["CaptureCpuHookMinPct"] == "-2.0" and m["CaptureCpuHookMaxPct"] == "4.0"
    assert captures.cpu_capture_macros(None)["CaptureCpuNumTraces"] == "n/a"


def test_largest_speedup_names_its_scope() -> None:
    data = synthetic_collected()
    beyond = data[data["world_size"] == 16].assign(world_size=512)
    beyond.loc[beyond["algorithm"] == "wfbp", "iteration_s"] *= 10
    both = pd.concat([data.assign(extrapolated=False), beyond.assign(extrapolated=True)])
    m = replay.max_speedup_macros(both)
    assert m["MaxSpeedupOverWfbpExtrapWorldSize"] == "512"
    assert float(m["MaxSpeedupOverWfbpExtrap"]) > float(
        replay.replay_macros(both, replay.Headline())["MaxSpeedupOverWfbp"])
    assert m["MaxSpeedupOverWfbpWorldSize"] != "512"
    assert replay.max_speedup_macros(data)["MaxSpeedupOverWfbpExtrap"] == "n/a"
