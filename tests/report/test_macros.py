"""The report's LaTeX macros: they match the CSVs they come from and are TeX control words.

Inputs are small SYNTHETIC result tables made here (never committed as measurements)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.cli import main
from gradsched.report import captures, gpu_generations, latex, paper_macros, reexec, replay
from tests.report.test_collect import synthetic_collected, synthetic_fits
from tests.report.test_tables import with_contig_tied_to_search


def test_replay_macros_leave_out_extrapolated_world_sizes() -> None:
    data = synthetic_collected()
    beyond = data[data["world_size"] == 16].assign(
        world_size=512, iteration_s=lambda f: f["iteration_s"] * 5,
        algorithm=lambda f: f["algorithm"])
    beyond.loc[beyond["algorithm"] == "wfbp", "iteration_s"] *= 10  # a huge "speedup"
    both = pd.concat([data.assign(extrapolated=False), beyond.assign(extrapolated=True)])
    measured = replay.replay_macros(data, replay.Headline())
    with_beyond = replay.replay_macros(both, replay.Headline())
    assert with_beyond["NumReplayCases"] == measured["NumReplayCases"] == "4"
    assert with_beyond["MaxSpeedupOverWfbp"] == measured["MaxSpeedupOverWfbp"]


def test_macros_match_the_csvs(tmp_path: Path) -> None:
    collected, fits = synthetic_collected(), synthetic_fits()
    cpath, fpath, out = tmp_path / "replay.csv", tmp_path / "fits.csv", tmp_path / "m.tex"
    collected.to_csv(cpath, index=False)
    fits.to_csv(fpath, index=False)
    assert main(["report", "macros", "--replay", str(cpath), "--fits", str(fpath),
                 "--headline-trace", "toy", "--headline-network", "net-b", "-o", str(out)]) == 0
    values = latex.parse_macros(out.read_text())
    # independent recomputation from the CSVs
    assert values["MedianHeldoutMapePiecewise"] == f"{np.median([2.0, 5.0, 8.0]):.1f}"
    assert values["MedianHeldoutMapeAlphaBeta"] == "20.0"
    assert values["MaxHeldoutMapeTracePiecewise"] == "file-2"
    assert values["NumCommTraces"] == "3"
    head = collected[(collected["network"] == "net-b") & (collected["world_size"] == 16)]
    t = dict(zip(head["algorithm"], head["iteration_s"], strict=True))
    assert values["HeadlineWorldSize"] == "16"
    assert values["HeadlineFastest"] == "Search"
    assert values["HeadlineFastestSpeedupOverWfbp"] == f"{t['wfbp'] / t['search']:.2f}"
    assert values["HeadlineMgwfbpSpeedupOverWfbp"] == f"{t['wfbp'] / t['mgwfbp']:.2f}"
    assert values["MgwfbpSearchGapMaxPct"] == f"{100 * (1.05 / 1.00 - 1):.1f}"
    assert values["NumReplayCases"] == "4"
    assert values["NumCasesSearchFastest"] == "4"
    assert values["MaxSpeedupOverWfbpAlgorithm"] == "Search"
    # missing inputs are n/a, never a number
    assert values["MedianCrossWsMape"] == "n/a"
    assert values["CompareNumChecked"] == "n/a"


def test_reexec_macros_from_measured(tmp_path: Path) -> None:
    from tests.reexec.test_analysis import _synthetic_measured

    frame = _synthetic_measured().assign(collective_cpu_s=4e-4)
    path, out = tmp_path / "measured.csv", tmp_path / "m.tex"
    frame.to_csv(path, index=False)
    assert main(["report", "macros", "--reexec", str(path), "-o", str(out)]) == 0
    values = latex.parse_macros(out.read_text())
    # SYNTHETIC rows: every plan predicted 1/1.1 of its measured time
    assert values["ReexecMedianErr"] == f"{100 * (1 - 1 / 1.1):.1f}"
    assert values["ReexecLoopbackMedianErr"] == values["ReexecMedianErr"]
    assert values["ReexecTau"] == "1.00" and values["ReexecOrderOk"] == "100"
    assert values["ReexecPairs"] == "10" and values["ReexecNumCases"] == "1"
    assert values["ReexecBestAsFastCases"] == "1"
    assert values["ReexecLoopbackPTwoCollectiveCpuMs"] == "0.40"
    assert values["ReexecLoopbackPThreeCollectiveCpuMs"] == "n/a"  # no 3-rank case
    assert values["ReexecTbfOnegbitMedianErr"] == "n/a"  # no case on that network
    assert reexec.reexec_macros(None, None)["ReexecTau"] == "n/a"
    bench = tmp_path / "bench.json"
    bench.write_text('{"paired_ratio": 0.97, "model": "resnet18-32", '
                     '"iterations": {"executor": [0.1, 0.2], "ddp-native": [0.1, 0.2]}}')
    assert main(["report", "macros", "--executor-bench", str(bench), "-o", str(out)]) == 0
    values = latex.parse_macros(out.read_text())
    assert values["ExecVsDdpBenchPct"] == "-3.0" and values["ExecVsDdpBenchIters"] == "2"
    assert values["ExecVsDdpBenchModel"] == "resnet18-32"
    bench.write_text("{oops")
    assert main(["report", "macros", "--executor-bench", str(bench), "-o", str(out)]) == 2


def test_macro_names_are_tex_control_words() -> None:
    text = latex.render(paper_macros.all_macros(paper_macros.MacroInputs(
        fits=synthetic_fits(), collected=synthetic_collected())))
    for line in text.splitlines():
        if line.startswith(r"\newcommand"):
            name = line.split("}", 1)[0][len(r"\newcommand{\\") - 1:]
            assert name.isalpha(), name
    assert latex.camel("alpha-beta") == "AlphaBeta"


def test_boot_macros_count_cases_against_the_targets():
    from gradsched.report.reexec import reexec_boot_macros

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
    settings = reexec_boot_macros(None, 95.0, 1000)
    assert settings["ReexecCiLevel"] == "95" and settings["ReexecBootReplicates"] == "1000"


def _gpu_case(family: str, trace: str, network: str, ddp: tuple[float, float],
              best: float, extrapolated: bool = False, world_size: int = 16) -> pd.DataFrame:
    """Two algorithms of one synthetic case: DDP (iteration, exposed) and best (iteration)."""
    rows = [("ddp", ddp[0], ddp[1]), ("best", best, 0.0)]
    return pd.DataFrame([{"trace": trace, "network": network, "world_size": world_size,
                          "nodes": 2, "family": family, "pairing": "matched-generation",
                          "extrapolated": extrapolated, "algorithm": alg,
                          "iteration_s": it, "compute_s": 0.050, "exposed_comm_s": exposed}
                         for alg, it, exposed in rows])


def test_gpu_generation_macros_per_family_and_case() -> None:
    data = pd.concat([
        _gpu_case("v100", "a", "abci", (0.100, 0.010), 0.095),
        _gpu_case("v100", "a", "abci", (0.500, 0.400), 0.100, extrapolated=True,
                  world_size=512),  # beyond the sweeps: never counted
        _gpu_case("h200", "gpt2-h200-fp32", "a3mega", (0.060, 0.010), 0.050),
        _gpu_case("h200", "gpt2-h200-bf16", "a3mega", (0.080, 0.030), 0.064),
    ])
    out = gpu_generations.gpu_generation_macros(data)
    assert out["GenVOneZeroZeroNumCases"] == "1"
    assert out["GenVOneZeroZeroDdpExposedMedianPct"] == "10.0"
    assert out["GenVOneZeroZeroBestGainMaxPct"] == "5.3"
    assert out["GenHTwoZeroZeroNumCases"] == "2"
    assert out["GenHTwoZeroZeroBestGainMaxPct"] == "25.0"
    assert out["GenGptTwoHTwoZeroZeroBfOneSixAThreemegaDdpExposedPct"] == "37.5"
    assert out["GenGptTwoHTwoZeroZeroFpThreeTwoAThreemegaComputeMs"] == "50.0"
    assert out["GenKEightZeroNumCases"] == latex.NA  # a family without cases: n/a
    assert all(name.isalpha() for name in out)


def test_gpu_capture_macros_from_the_sidecars() -> None:
    out = captures.gpu_capture_macros({"a-b8-cuda-bf16": {"capture_overhead": 0.379},
                                     "c-b4-cuda-fp32": {"capture_overhead": 0.002},
                                     "d-b2-cuda-fp32": None})
    assert out["CaptureNumGpuTraces"] == "2" and out["CaptureNumGpuTracesOverThreePct"] == "1"
    assert out["CaptureHookOverheadMaxPct"] == "37.9"
    assert out["CaptureHookOverheadMaxTrace"] == "a-b8-cuda-bf16"
    assert out["CaptureHookOverheadCBFourCudaFpThreeTwoPct"] == "0.2"
    assert captures.gpu_capture_macros({})["CaptureHookOverheadMaxPct"] == latex.NA


def test_macros_naming_a_winner_credit_a_tie_within_float_noise() -> None:
    """Contig-opt 1 ulp below Search on every case: the headline, the largest speed-up and
    the count of cases where search is fastest all credit the tie."""
    data = with_contig_tied_to_search(synthetic_collected(), -1)
    values = replay.replay_macros(data, replay.Headline(trace="toy", network="net-b"))
    assert values["HeadlineFastest"] == "Contig-opt = Search"
    assert values["MaxSpeedupOverWfbpAlgorithm"] == "Contig-opt = Search"
    assert values["NumCasesSearchFastest"] == "4"
    assert values["TieRelTol"] == "1e-9"  # gradsched.ties.RTOL, quoted by claims.md
