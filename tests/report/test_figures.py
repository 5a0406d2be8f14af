"""The report's figures: PDF and PNG, deterministic, and a clear page where data is missing.

Inputs are small SYNTHETIC result tables made here (never committed as measurements)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.report import (
    figure_relative,
    figure_style,
    fits_figures,
    gpu_generations,
    replay,
    timeline,
)
from tests.report.test_collect import synthetic_collected, synthetic_fits


def _valid_pdf_png(stem: Path) -> None:
    pdf, png = stem.with_suffix(".pdf"), stem.with_suffix(".png")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


def test_replay_and_gap_figures(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    replay.replay_vs_world_size(data, tmp_path / "r.pdf", tmp_path / "r.png")
    replay.gaps(data, tmp_path / "g.pdf", tmp_path / "g.png")
    _valid_pdf_png(tmp_path / "r")
    _valid_pdf_png(tmp_path / "g")


def test_replay_figure_draws_one_family_with_its_pairing(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    titles: list[str] = []
    real_save = figure_style.save

    def record(fig, out_pdf, out_png) -> None:
        titles.extend(ax.get_title() for ax in fig.axes if ax.get_visible())
        real_save(fig, out_pdf, out_png)

    monkeypatch.setattr(replay, "save", record)
    replay.replay_vs_world_size(data, tmp_path / "a.pdf", tmp_path / "a.png", family="fam-b")
    assert titles == ["toy\nx net-b\n[WHAT-IF: unrelated systems]"]
    _valid_pdf_png(tmp_path / "a")
    empty: list[str] = []
    monkeypatch.setattr(replay, "placeholder", lambda *args: empty.append(args[3]))
    replay.replay_vs_world_size(data, tmp_path / "b.pdf", tmp_path / "b.png", family="none")
    assert empty == ["no replay results"]


def test_figures_are_deterministic(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    replay.gaps(data, tmp_path / "a.pdf", tmp_path / "a.png")
    replay.gaps(data, tmp_path / "b.pdf", tmp_path / "b.png")
    assert (tmp_path / "a.pdf").read_bytes() == (tmp_path / "b.pdf").read_bytes()
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_fit_mape_and_curves(tmp_path: Path) -> None:
    fits_csv = tmp_path / "fits.csv"
    synthetic_fits().to_csv(fits_csv, index=False)
    fits_figures.fit_mape(fits_csv, tmp_path / "m.pdf", tmp_path / "m.png")
    _valid_pdf_png(tmp_path / "m")
    comm = tmp_path / "file-0.csv"
    sizes = np.geomspace(4, 1 << 24, 12).astype(int)
    pd.DataFrame({"collective": "all_reduce", "backend": "nccl", "world_size": 8, "nodes": 1,
                  "in_place": 0, "bytes": sizes, "time_s": 1e-5 + sizes * 1e-10}
                 ).to_csv(comm, index=False)
    model = tmp_path / "file-0.alpha-beta.json"
    model.write_text(json.dumps({"kind": "alpha-beta", "alpha_s": 1e-5,
                                 "beta_s_per_byte": 1e-10}))
    fits_figures.fit_curves([comm], [model], fits_csv, tmp_path / "c.pdf", tmp_path / "c.png")
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
    timeline.timeline([csv], tmp_path / "t.pdf", tmp_path / "t.png", title="toy")
    _valid_pdf_png(tmp_path / "t")


def test_missing_data_figure_says_so(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().head(0).to_csv(data, index=False)
    replay.replay_vs_world_size(data, tmp_path / "e.pdf", tmp_path / "e.png")
    _valid_pdf_png(tmp_path / "e")


def test_figure_cli_writes_pdf_and_png(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    assert main(["report", "figure", "gaps", "--input", str(data), "-o",
                 str(tmp_path / "x.pdf")]) == 0
    _valid_pdf_png(tmp_path / "x")


def test_gpu_generations_figure_and_its_empty_page(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    data = synthetic_collected()
    gpu = data.assign(family=data["family"].map({"fam-a": "v100", "fam-b": "h200"}),
                      algorithm=data["algorithm"].replace({"wfbp": "ddp"}))
    path = tmp_path / "gpu.csv"
    gpu.to_csv(path, index=False)
    gpu_generations.gpu_generations(path, tmp_path / "g.pdf", tmp_path / "g.png")
    _valid_pdf_png(tmp_path / "g")
    other = tmp_path / "other.csv"
    data.to_csv(other, index=False)  # no GPU family: a page that says so
    empty: list[str] = []
    monkeypatch.setattr(gpu_generations, "placeholder", lambda *args: empty.append(args[3]))
    gpu_generations.gpu_generations(other, tmp_path / "e.pdf", tmp_path / "e.png")
    assert empty and empty[0].startswith("no GPU replay results")


def _one_world_size_each() -> pd.DataFrame:
    """SYNTHETIC H200-like cases: three computes on two networks, one world size each."""
    data = synthetic_collected()
    data = data[data["world_size"] == data.groupby("network")["world_size"].transform("max")]
    extra = data[data["algorithm"] == "search"].assign(algorithm="ddp")
    extra["iteration_s"] *= 1.25
    data = pd.concat([data, extra], ignore_index=True)
    return pd.concat([data.assign(trace=f"model-{i}", iteration_s=data["iteration_s"] * (i + 1))
                      for i in range(3)], ignore_index=True)


def test_cases_at_one_world_size_are_drawn_relative_to_ddp(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """One world size per case: no lines against P (a column of markers on independent
    axes) but every algorithm relative to its case's PyTorch DDP default."""
    data = _one_world_size_each()
    rel = figure_relative.relative_rows(data)
    assert set(rel.loc[rel["algorithm"] == "ddp", "ratio"]) == {1.0}
    search = rel.loc[rel["algorithm"] == "search", "ratio"]
    assert np.allclose(search, 1 / 1.25) and len(search) == 6  # 3 computes x 2 networks
    assert (rel["algorithm"] == "lower bound").sum() == 6
    path = tmp_path / "replay.csv"
    data.to_csv(path, index=False)
    drawn = []
    monkeypatch.setattr(replay, "relative_to_ddp", lambda *a: drawn.append(a))
    replay.replay_vs_world_size(path, tmp_path / "h.pdf", tmp_path / "h.png")
    assert len(drawn) == 1
    monkeypatch.undo()
    replay.replay_vs_world_size(path, tmp_path / "h.pdf", tmp_path / "h.png")
    _valid_pdf_png(tmp_path / "h")
