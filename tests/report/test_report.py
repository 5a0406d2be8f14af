"""The report stage: collect, tables, macros, figures and the reproduced-vs-published checks.

Inputs are small SYNTHETIC result tables made here (never committed as measurements)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError, InputError
from gradsched.report import compare, figures, macros, tables
from gradsched.report.collect import CASE_COLUMNS, COLLECTED_COLUMNS, Case, collect_cases

ALGS = ("syncsgd", "wfbp", "mgwfbp", "dear", "search", "best")


def synthetic_collected() -> pd.DataFrame:
    """Two networks x two world sizes; times chosen so every quantity is known by hand."""
    rows = []
    times = {"syncsgd": 1.40, "wfbp": 1.20, "mgwfbp": 1.05, "dear": 1.10, "search": 1.00,
             "best": 1.00}
    for network, scale, family, pairing in (("net-a", 1.0, "fam-a", "real"),
                                            ("net-b", 2.0, "fam-b", "what-if")):
        for world in (8, 16):
            for alg in ALGS:
                t = times[alg] * scale * (1 + world / 160)
                rows.append({"trace": "toy", "network": network, "comm_file": f"{network}-{world}",
                             "nodes": world // 8, "family": family, "pairing": pairing,
                             "algorithm": alg, "world_size": world,
                             "iteration_s": t, "compute_s": 0.9, "exposed_comm_s": t - 0.9,
                             "n_collectives": 3, "n_buckets": 3, "comm_busy_s": 0.5,
                             "lower_bound_s": 0.95 * scale,
                             "gap_to_lb_pct": 100 * (t / (0.95 * scale) - 1), "knobs": "{}"})
    return pd.DataFrame(rows, columns=list(COLLECTED_COLUMNS))


def synthetic_fits() -> pd.DataFrame:
    rows = []
    for i, (ab, pw) in enumerate([(20.0, 2.0), (30.0, 5.0), (10.0, 8.0)]):
        for model, mape in (("alpha-beta", ab), ("piecewise", pw)):
            rows.append({"trace": f"file-{i}", "collective": "all_reduce", "backend": "nccl",
                         "world_size": 8 * (i + 1), "nodes": i + 1, "model": model,
                         "n_sizes": 20, "min_bytes": 4, "max_bytes": 1 << 25,
                         "train_mape_pct": mape / 2, "heldout_mape_pct": mape,
                         "heldout_max_ape_pct": 3 * mape, "alpha_s": 1e-5,
                         "beta_s_per_byte": 1e-10, "n_segments": 1})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- collect


def test_collect_adds_case_columns(tmp_path: Path) -> None:
    comm = tmp_path / "comm.csv"
    pd.DataFrame({"collective": ["all_reduce"] * 2, "world_size": [16, 16], "nodes": [2, 2],
                  "bytes": [4, 8], "time_s": [1e-5, 2e-5]}).to_csv(comm, index=False)
    result = tmp_path / "r.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(3) \
        .to_csv(result, index=False)
    out = collect_cases([Case("toy", "net", comm, result, "gpu", "matched-gpu")])
    assert list(out.columns) == list(COLLECTED_COLUMNS)
    assert set(out["nodes"]) == {2} and set(out["network"]) == {"net"}
    assert set(out["comm_file"]) == {"comm"}
    assert set(out["family"]) == {"gpu"} and set(out["pairing"]) == {"matched-gpu"}


def test_collect_labels_an_extrapolated_case_and_its_nodes(tmp_path: Path) -> None:
    reference = tmp_path / "sweep-128.csv"  # 128 ranks on 32 nodes: 4 per node
    pd.DataFrame({"collective": ["all_reduce"] * 2, "world_size": [128, 128],
                  "nodes": [32, 32], "bytes": [4, 8], "time_s": [1e-5, 2e-5]}
                 ).to_csv(reference, index=False)
    result = tmp_path / "p512.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(2) \
        .assign(world_size=512).to_csv(result, index=False)
    out = collect_cases([Case("toy", "net", reference, result, "gpu", "matched-gpu",
                              extrapolated=True)])
    assert set(out["nodes"]) == {128} and set(out["extrapolated"]) == {True}
    assert set(out["comm_file"]) == {"extrapolated from sweep-128"}
    mixed = tmp_path / "mixed.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(12).to_csv(mixed, index=False)
    with pytest.raises(InputError, match="one world size"):
        collect_cases([Case("toy", "net", reference, mixed, extrapolated=True)])


def test_replay_table_and_figure_mark_extrapolated_world_sizes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = synthetic_collected().assign(extrapolated=lambda f: f["world_size"] == 16)
    table, _ = tables.replay_table(data)
    assert list(table["P [ranks]"]) == ["8", "16 (extrap.)", "8", "16 (extrap.)"]
    csv = tmp_path / "replay.csv"
    data.to_csv(csv, index=False)
    spans: list[tuple[float, float]] = []
    real_save = figures.save

    def record(fig, out_pdf, out_png) -> None:
        for ax in fig.axes:
            spans.extend((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
        real_save(fig, out_pdf, out_png)

    monkeypatch.setattr(figures, "save", record)
    figures.replay_vs_world_size(csv, tmp_path / "x.pdf", tmp_path / "x.png", family="fam-a")
    assert len(spans) == 1 and 8 < spans[0][0] < 16 < spans[0][1]  # shades 16, not 8


def test_replay_macros_leave_out_extrapolated_world_sizes() -> None:
    data = synthetic_collected()
    beyond = data[data["world_size"] == 16].assign(
        world_size=512, iteration_s=lambda f: f["iteration_s"] * 5,
        algorithm=lambda f: f["algorithm"])
    beyond.loc[beyond["algorithm"] == "wfbp", "iteration_s"] *= 10  # a huge "speedup"
    both = pd.concat([data.assign(extrapolated=False), beyond.assign(extrapolated=True)])
    measured = macros.replay_macros(data, macros.Headline())
    with_beyond = macros.replay_macros(both, macros.Headline())
    assert with_beyond["NumReplayCases"] == measured["NumReplayCases"] == "4"
    assert with_beyond["MaxSpeedupOverWfbp"] == measured["MaxSpeedupOverWfbp"]


def test_collect_refuses_an_unknown_pairing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown pairing 'same-gpu'"):
        Case("toy", "net", tmp_path / "c.csv", tmp_path / "r.csv", "gpu", "same-gpu")


def test_collect_cli_labels_cases_and_refuses_a_stray_label(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    comm = tmp_path / "comm.csv"
    pd.DataFrame({"nodes": [2]}).to_csv(comm, index=False)
    result = tmp_path / "r.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(2).to_csv(result, index=False)
    out = tmp_path / "all.csv"
    case = ["--case", "toy", "net", str(comm), str(result)]
    assert main(["report", "collect", *case, "--label", "toy", "net", "v100", "matched-gpu",
                 "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert set(frame["family"]) == {"v100"} and set(frame["pairing"]) == {"matched-gpu"}
    assert main(["report", "collect", *case, "-o", str(out)]) == 0
    assert set(pd.read_csv(out)["pairing"]) == {"what-if"}  # unlabelled: never "real"
    assert main(["report", "collect", *case, "--label", "toy", "other", "v100", "real",
                 "-o", str(out)]) != 0
    assert "--label for a pair with no --case: toy other" in capsys.readouterr().err


def test_collect_rejects_mixed_node_counts(tmp_path: Path) -> None:
    comm = tmp_path / "comm.csv"
    pd.DataFrame({"nodes": [1, 2]}).to_csv(comm, index=False)
    result = tmp_path / "r.csv"
    synthetic_collected().drop(columns=list(CASE_COLUMNS)).head(1) \
        .to_csv(result, index=False)
    with pytest.raises(ValueError, match="one node count"):
        collect_cases([Case("toy", "net", comm, result)])


# -------------------------------------------------------------------------- tables


def test_latex_table_is_booktabs_and_escaped() -> None:
    frame = pd.DataFrame({"name [%]": ["a_b", "50%"], "x [ms]": ["1.0", "2.0"]})
    tex = tables.to_latex(frame, "lr")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"a\_b" in tex and r"50\%" in tex and r"name [\%]" in tex
    assert tex.count(r"\\") == 3  # header + 2 rows
    md = tables.to_markdown(frame)
    assert md.splitlines()[0] == "| name [%] | x [ms] |"


def test_replay_table_units_fastest_and_bound() -> None:
    table, align = tables.replay_table(synthetic_collected())
    assert len(table) == 4 and len(align) == len(table.columns)
    assert all("[" in c for c in table.columns if c not in ("compute", "network", "fastest"))
    assert set(table["fastest"]) == {"Search"}  # the oracle `best` is excluded
    first = table.iloc[0]
    assert first["WFBP [ms]"] == f"{1.20 * (1 + 8 / 160) * 1e3:.1f}"
    assert first["bound [ms]"] == f"{0.95e3:.1f}"


def test_fits_table_pivots_models() -> None:
    table, _ = tables.fits_table(synthetic_fits())
    assert len(table) == 3
    assert table.loc[0, "held-out MAPE piecewise [%]"] == "2.0"
    assert list(table.columns).index("held-out MAPE alpha-beta [%]") < list(
        table.columns).index("held-out MAPE piecewise [%]")


def test_empty_input_gives_a_no_data_table(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    table = tables.build_table("crossws", [empty], tmp_path / "t.tex", tmp_path / "t.md")
    assert table.empty
    assert "no data" in (tmp_path / "t.tex").read_text()


# -------------------------------------------------------------------------- macros


def test_macros_match_the_csvs(tmp_path: Path) -> None:
    collected, fits = synthetic_collected(), synthetic_fits()
    cpath, fpath, out = tmp_path / "replay.csv", tmp_path / "fits.csv", tmp_path / "m.tex"
    collected.to_csv(cpath, index=False)
    fits.to_csv(fpath, index=False)
    assert main(["report", "macros", "--replay", str(cpath), "--fits", str(fpath),
                 "--headline-trace", "toy", "--headline-network", "net-b", "-o", str(out)]) == 0
    values = macros.parse_macros(out.read_text())
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
    from tests.reexec.test_reexec import _synthetic_measured

    frame = _synthetic_measured().assign(collective_cpu_s=4e-4)
    path, out = tmp_path / "measured.csv", tmp_path / "m.tex"
    frame.to_csv(path, index=False)
    assert main(["report", "macros", "--reexec", str(path), "-o", str(out)]) == 0
    values = macros.parse_macros(out.read_text())
    # SYNTHETIC rows: every plan predicted 1/1.1 of its measured time
    assert values["ReexecMedianErr"] == f"{100 * (1 - 1 / 1.1):.1f}"
    assert values["ReexecLoopbackMedianErr"] == values["ReexecMedianErr"]
    assert values["ReexecTau"] == "1.00" and values["ReexecOrderOk"] == "100"
    assert values["ReexecPairs"] == "10" and values["ReexecNumCases"] == "1"
    assert values["ReexecBestAsFastCases"] == "1"
    assert values["ReexecLoopbackPTwoCollectiveCpuMs"] == "0.40"
    assert values["ReexecLoopbackPThreeCollectiveCpuMs"] == "n/a"  # no 3-rank case
    assert values["ReexecTbfOnegbitMedianErr"] == "n/a"  # no case on that network
    assert macros.reexec_macros(None)["ReexecTau"] == "n/a"
    bench = tmp_path / "bench.json"
    bench.write_text('{"paired_ratio": 0.97, "model": "resnet18-32", '
                     '"iterations": {"executor": [0.1, 0.2], "ddp-native": [0.1, 0.2]}}')
    assert main(["report", "macros", "--executor-bench", str(bench), "-o", str(out)]) == 0
    values = macros.parse_macros(out.read_text())
    assert values["ExecVsDdpBenchPct"] == "-3.0" and values["ExecVsDdpBenchIters"] == "2"
    assert values["ExecVsDdpBenchModel"] == "resnet18-32"
    bench.write_text("{oops")
    assert main(["report", "macros", "--executor-bench", str(bench), "-o", str(out)]) == 2


def test_macro_names_are_tex_control_words() -> None:
    text = macros.render(macros.all_macros(synthetic_fits(), None, synthetic_collected()))
    for line in text.splitlines():
        if line.startswith(r"\newcommand"):
            name = line.split("}", 1)[0][len(r"\newcommand{\\") - 1:]
            assert name.isalpha(), name
    assert macros.camel("alpha-beta") == "AlphaBeta"


# ------------------------------------------------------------------------- figures


def _valid_pdf_png(stem: Path) -> None:
    pdf, png = stem.with_suffix(".pdf"), stem.with_suffix(".png")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


def test_replay_and_gap_figures(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    figures.replay_vs_world_size(data, tmp_path / "r.pdf", tmp_path / "r.png")
    figures.gaps(data, tmp_path / "g.pdf", tmp_path / "g.png")
    _valid_pdf_png(tmp_path / "r")
    _valid_pdf_png(tmp_path / "g")


def test_replay_figure_draws_one_family_with_its_pairing(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    titles: list[str] = []
    real_save = figures.save

    def record(fig, out_pdf, out_png) -> None:
        titles.extend(ax.get_title() for ax in fig.axes if ax.get_visible())
        real_save(fig, out_pdf, out_png)

    monkeypatch.setattr(figures, "save", record)
    figures.replay_vs_world_size(data, tmp_path / "a.pdf", tmp_path / "a.png", family="fam-b")
    assert titles == ["toy\nx net-b\n[WHAT-IF: unrelated systems]"]
    _valid_pdf_png(tmp_path / "a")
    empty: list[str] = []
    monkeypatch.setattr(figures, "placeholder", lambda *args: empty.append(args[3]))
    figures.replay_vs_world_size(data, tmp_path / "b.pdf", tmp_path / "b.png", family="none")
    assert empty == ["no replay results"]


def test_figures_are_deterministic(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    figures.gaps(data, tmp_path / "a.pdf", tmp_path / "a.png")
    figures.gaps(data, tmp_path / "b.pdf", tmp_path / "b.png")
    assert (tmp_path / "a.pdf").read_bytes() == (tmp_path / "b.pdf").read_bytes()
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_fit_mape_and_curves(tmp_path: Path) -> None:
    fits = tmp_path / "fits.csv"
    synthetic_fits().to_csv(fits, index=False)
    figures.fit_mape(fits, tmp_path / "m.pdf", tmp_path / "m.png")
    _valid_pdf_png(tmp_path / "m")
    comm = tmp_path / "file-0.csv"
    sizes = np.geomspace(4, 1 << 24, 12).astype(int)
    pd.DataFrame({"collective": "all_reduce", "backend": "nccl", "world_size": 8, "nodes": 1,
                  "in_place": 0, "bytes": sizes, "time_s": 1e-5 + sizes * 1e-10}
                 ).to_csv(comm, index=False)
    model = tmp_path / "file-0.alpha-beta.json"
    model.write_text(json.dumps({"kind": "alpha-beta", "alpha_s": 1e-5,
                                 "beta_s_per_byte": 1e-10}))
    figures.fit_curves([comm], [model], fits, tmp_path / "c.pdf", tmp_path / "c.png")
    _valid_pdf_png(tmp_path / "c")


def test_timeline_figure(tmp_path: Path) -> None:
    rows = []
    for it in range(5):
        base = it * 1.0
        rows.append((it, "compute", "backward", "bw", base, base + 0.6, 0))
        rows.append((it, "comm", "all_reduce", "bucket 0", base + 0.3, base + 0.9, 1000))
    csv = tmp_path / "wfbp.timeline.csv"
    pd.DataFrame(rows, columns=["iteration", "lane", "kind", "label", "start_s", "end_s",
                                "bytes"]).to_csv(csv, index=False)
    figures.timeline([csv], tmp_path / "t.pdf", tmp_path / "t.png", title="toy")
    _valid_pdf_png(tmp_path / "t")


def test_missing_data_figure_says_so(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().head(0).to_csv(data, index=False)
    figures.replay_vs_world_size(data, tmp_path / "e.pdf", tmp_path / "e.png")
    _valid_pdf_png(tmp_path / "e")


def test_figure_cli_writes_pdf_and_png(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    assert main(["report", "figure", "gaps", "--input", str(data), "-o",
                 str(tmp_path / "x.pdf")]) == 0
    _valid_pdf_png(tmp_path / "x")


# ------------------------------------------------------------------------- compare

NCCL_LOG = """# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor)
#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error
      8      2 float    sum 10.00   0.00   0.00  0e+00 10.00   0.00   0.00  0e+00
1048576 262144 float    sum 100.0  10.49  {bus}  0e+00 100.0  10.49  {bus}  0e+00
# Avg bus bandwidth    : {avg}
"""


def _nccl_trace(path: Path, world: int) -> None:
    pd.DataFrame({"collective": "all_reduce", "backend": "nccl", "world_size": world,
                  "nodes": 1, "in_place": [0, 1, 0, 1], "bytes": [8, 8, 1048576, 1048576],
                  "time_s": [1e-5, 1e-5, 1e-4, 1e-4]}).to_csv(path, index=False)


def test_nccl_busbw_check_within_and_outside(tmp_path: Path) -> None:
    world = 4
    bus = 1048576 / 1e-4 / 1e9 * 2 * (world - 1) / world
    small = 8 / 1e-5 / 1e9 * 2 * (world - 1) / world
    avg = (2 * bus + 2 * small) / 4
    log = tmp_path / "ok.txt"
    log.write_text(NCCL_LOG.format(bus=f"{bus:.2f}", avg=f"{avg:.5f}"))
    trace = tmp_path / "t.csv"
    _nccl_trace(trace, world)
    row = compare.nccl_busbw_row(log, trace)
    assert row["verdict"] == "within" and abs(row["rel_diff_pct"]) < 0.01
    log.write_text(NCCL_LOG.format(bus=f"{bus:.2f}", avg=f"{avg * 1.1:.5f}"))
    assert compare.nccl_busbw_row(log, trace)["verdict"] == "outside"


def test_bcaffe_merge_check(tmp_path: Path) -> None:
    lines = []
    for dump, merged in ((0, (0, 0, 0, 0)), (1, (30, 0, 40, 0))):
        for pid, m in enumerate(merged):
            lines.append(f"I0219 13:35:4{dump}.031509 69510 distributed.cpp:112] "
                         f"[{pid}, 64, {5 * dump}, 25, {m}]")
    log = tmp_path / "tmp8comm.log"
    log.write_text("\n".join(lines) + "\n")
    result = tmp_path / "r.csv"
    pd.DataFrame({"algorithm": ["wfbp", "mgwfbp"], "comm_busy_s": [1.0, 0.7]}).to_csv(
        result, index=False)
    row = compare.bcaffe_merge_row(log, result, "case")
    assert math.isclose(row["published"], 70 / 100)
    assert math.isclose(row["reproduced"], 0.7) and row["verdict"] == "within"


def test_compare_cli_writes_skipped_rows(tmp_path: Path) -> None:
    out = tmp_path / "c.csv"
    assert main(["report", "compare", "--skip", "nccl-busbw", "x", "no log", "-o",
                 str(out)]) == 0
    frame = pd.read_csv(out)
    assert frame["verdict"].tolist() == ["skipped"]
    assert math.isnan(frame["published"].iloc[0])
