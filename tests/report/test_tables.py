"""The report's tables: booktabs LaTeX, escaped and readable (wrapped headers), units, the
fastest plan and the bound marked, and a no-data table for empty input.

Inputs are small SYNTHETIC result tables made here (never committed as measurements)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.report import figure_style, fits, latex, replay, tables
from gradsched.report.latex import header_cell, to_latex
from tests.report.test_collect import synthetic_collected, synthetic_fits


def test_long_headers_wrap_and_a_bracket_line_is_safe() -> None:
    assert header_cell("WFBP") == "WFBP"
    cell = header_cell("held-out MAPE piecewise [%]")
    assert cell.startswith(r"\begin{tabular}[b]") and r"\\{}[\%]" in cell
    tex = to_latex(pd.DataFrame({"SyncSGD [ms]": ["1.0"]}))
    assert r"SyncSGD\\{}[ms]" in tex  # "\\[" would read [ms] as a length


def test_replay_table_and_figure_mark_extrapolated_world_sizes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = synthetic_collected().assign(extrapolated=lambda f: f["world_size"] == 16)
    table, _ = replay.replay_table(data)
    assert list(table["P [ranks]"]) == ["8", "16 (extrap.)", "8", "16 (extrap.)"]
    csv = tmp_path / "replay.csv"
    data.to_csv(csv, index=False)
    spans: list[tuple[float, float]] = []
    real_save = figure_style.save

    def record(fig, out_pdf, out_png) -> None:
        for ax in fig.axes:
            spans.extend((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
        real_save(fig, out_pdf, out_png)

    monkeypatch.setattr(replay, "save", record)
    replay.replay_vs_world_size(csv, tmp_path / "x.pdf", tmp_path / "x.png", family="fam-a")
    assert len(spans) == 1 and 8 < spans[0][0] < 16 < spans[0][1]  # shades 16, not 8


def test_latex_table_is_booktabs_and_escaped() -> None:
    frame = pd.DataFrame({"name [%]": ["a_b", "50%"], "x [ms]": ["1.0", "2.0"]})
    tex = latex.to_latex(frame, "lr")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"a\_b" in tex and r"50\%" in tex and r"name [\%]" in tex
    assert tex.count(r"\\") == 3  # header + 2 rows
    md = latex.to_markdown(frame)
    assert md.splitlines()[0] == "| name [%] | x [ms] |"


def test_replay_table_units_fastest_and_bound() -> None:
    table, align = replay.replay_table(synthetic_collected())
    assert len(table) == 4 and len(align) == len(table.columns)
    assert all("[" in c for c in table.columns if c not in ("compute", "network", "fastest"))
    assert set(table["fastest"]) == {"Search"}  # the oracle `best` is excluded
    first = table.iloc[0]
    assert first["WFBP [ms]"] == f"{1.20 * (1 + 8 / 160) * 1e3:.1f}"
    assert first["bound [ms]"] == f"{0.95e3:.1f}"


def test_fits_table_pivots_models() -> None:
    table, _ = fits.fits_table(synthetic_fits())
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


def with_contig_tied_to_search(collected: pd.DataFrame, ulps: int) -> pd.DataFrame:
    """``contiguous_optimum`` and ``oasr`` at search's time, moved by ``ulps`` ulps (the
    float noise of a cost model fitted through another BLAS kernel)."""
    search = collected[collected["algorithm"] == "search"]
    moved = search["iteration_s"].map(
        lambda t: float(np.nextafter(t, np.inf if ulps > 0 else 0.0)) if ulps else t)
    extra = [search.assign(algorithm=name, iteration_s=moved)
             for name in ("contiguous_optimum", "oasr")]
    return pd.concat([collected, *extra], ignore_index=True)


@pytest.mark.parametrize("ulps", [-1, 0, 1])
def test_a_tie_within_float_noise_prints_the_tied_set(ulps: int) -> None:
    """Whichever side the noise falls on, the fastest column names both tied schedules in
    the usual order (``oasr``, equal by construction, and the oracle are never credited)."""
    table, _ = replay.replay_table(with_contig_tied_to_search(synthetic_collected(), ulps))
    assert set(table["fastest"]) == {"Contig-opt = Search"}


def test_a_real_difference_is_not_a_tie() -> None:
    data = with_contig_tied_to_search(synthetic_collected(), 0)
    data.loc[data["algorithm"] == "contiguous_optimum", "iteration_s"] *= 1 + 1e-6
    table, _ = replay.replay_table(data)
    assert set(table["fastest"]) == {"Search"}


def test_the_latex_twin_counts_a_tie_the_markdown_names_it(tmp_path: Path) -> None:
    """The LaTeX replay table has no room for five names at 7 pt (paper/main.tex)."""
    csv = tmp_path / "replay.csv"
    with_contig_tied_to_search(synthetic_collected(), 1).to_csv(csv, index=False)
    tex, md = tmp_path / "t.tex", tmp_path / "t.md"
    tables.build_table("replay", [csv], tex, md)
    assert "Contig-opt = Search" in md.read_text() and "Contig-opt = Search" not in tex.read_text()
    assert tex.read_text().count("& 2 tied &") == 4
