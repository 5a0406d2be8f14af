"""Figures are readable at the width the paper includes them: text at 6 pt or more in print
(size drawn x include width / figure width), and no two series of a figure share a look."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.colors
import numpy as np
import pandas as pd
import pytest

from gradsched.report import figure_style, fits_figures, gpu_generations, replay
from tests.paper.test_fonts import MIN_PT, small_words
from tests.paper.test_paper import paper_text
from tests.report.test_collect import synthetic_collected, synthetic_fits

INCLUDE_RE = re.compile(r"\\includegraphics\[width=([\d.]*)\\textwidth\]\{figures/([^}]+)\.pdf\}")


def include_fraction(name: str) -> float:
    """The ``width=<f>\\textwidth`` the paper includes figure ``name`` at."""
    widths = {fig: float(f or 1) for f, fig in INCLUDE_RE.findall(paper_text())}
    return widths[name]


def printed_small_words(pdf: Path, name: str) -> list:
    """Words of ``pdf`` under :data:`MIN_PT` once it is scaled to its width in the paper."""
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True,
                          text=True).stdout
    width_pt = float(re.search(r"Page size:\s+([\d.]+) x", info).group(1))
    scale = include_fraction(name) * figure_style.TEXT_WIDTH_IN * 72 / width_pt
    return small_words(pdf, MIN_PT / scale)


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
def test_figures_print_at_6pt_or_more(tmp_path: Path) -> None:
    data = tmp_path / "replay.csv"
    synthetic_collected().to_csv(data, index=False)
    fits_csv = tmp_path / "fits.csv"
    synthetic_fits().to_csv(fits_csv, index=False)
    drawn = {"gaps": lambda p: replay.gaps(data, p, p.with_suffix(".png")),
             "replay-vs-world-size-cpu": lambda p: replay.replay_vs_world_size(
                 data, p, p.with_suffix(".png")),
             "gpu-generations": lambda p: gpu_generations.gpu_generations(
                 data, p, p.with_suffix(".png")),
             "fit-mape": lambda p: fits_figures.fit_mape(fits_csv, p, p.with_suffix(".png"))}
    for name, draw in drawn.items():
        pdf = tmp_path / f"{name}.pdf"
        draw(pdf)
        assert printed_small_words(pdf, name) == [], name


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
def test_the_print_check_catches_a_figure_drawn_too_wide(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(figure_style, "TEXT_WIDTH_IN", 3 * figure_style.TEXT_WIDTH_IN)
    fits_csv = tmp_path / "fits.csv"
    synthetic_fits().to_csv(fits_csv, index=False)
    fits_figures.fit_mape(fits_csv, tmp_path / "m.pdf", tmp_path / "m.png")
    monkeypatch.undo()
    assert printed_small_words(tmp_path / "m.pdf", "fit-mape")


def test_series_styles_never_repeat() -> None:
    styles = [figure_style.series_style(i) for i in range(40)]
    looks = {(s["color"], s["ls"], s["marker"]) for s in styles}
    assert len(looks) == 40
    assert len({s["color"] for s in styles[:len(figure_style.QUALITATIVE)]}) == len(
        figure_style.QUALITATIVE)


def test_algorithm_colors_keep_extra_series_apart() -> None:
    names = ["syncsgd", "wfbp", "ddp", "horovod", "bytescheduler", "mgwfbp", "oasr", "dear",
             "best", *(f"ddp-native-{c}" for c in ("default", "50", "25", "10", "5", "1"))]
    colors = figure_style.algorithm_colors(names)
    rgb = np.array([matplotlib.colors.to_rgb(colors[n]) for n in names])
    distance = np.linalg.norm(rgb[:, None, :] - rgb[None, :, :], axis=-1)
    np.fill_diagonal(distance, np.inf)
    assert distance.min() >= 0.15, distance.min()


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
def test_compression_figures_print_at_6pt_or_more(tmp_path: Path) -> None:
    from gradsched.report import compression

    rows = [{"method": m, "density": d, "step": s, "seed": seed, "wallclock_s": 0.1 * s,
             "test_accuracy": 0.5 + 0.004 * s * d ** 0.1}
            for m, ds in (("dense", (1.0,)), ("topk", (1 / 16, 1 / 64)),
                          ("importance", (1 / 16, 1 / 64)))
            for d in ds for s in range(0, 101, 20) for seed in (0, 1)]
    curves = tmp_path / "curves.csv"
    pd.DataFrame(rows).to_csv(curves, index=False)
    summary = tmp_path / "summary.csv"
    pd.DataFrame({"method": ["dense", "topk", "topk", "importance", "importance"],
                  "density": [1.0, 1 / 16, 1 / 64, 1 / 16, 1 / 64],
                  "bytes_per_step": [64000, 8000, 2000, 8000, 2000],
                  "bytes_received_per_step": [64000, 32000, 8000, 8000, 2000],
                  "compression_ratio": [1.0, 8.0, 32.0, 8.0, 32.0]}).to_csv(summary, index=False)
    compression.accuracy_vs_step(curves, tmp_path / "s.pdf", tmp_path / "s.png")
    compression.bytes_per_step(summary, tmp_path / "b.pdf", tmp_path / "b.png")
    assert printed_small_words(tmp_path / "s.pdf", "compression-accuracy-vs-step") == []
    assert printed_small_words(tmp_path / "b.pdf", "compression-bytes") == []
