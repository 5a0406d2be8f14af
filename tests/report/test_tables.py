"""Generated tables stay readable: wrapped headers, the re-execution table stacked (issue 17)."""

from __future__ import annotations

import pandas as pd

from gradsched.report.reexec import split_latex
from gradsched.report.tables import header_cell, to_latex


def test_long_headers_wrap_and_a_bracket_line_is_safe() -> None:
    assert header_cell("WFBP") == "WFBP"
    cell = header_cell("held-out MAPE piecewise [%]")
    assert cell.startswith(r"\begin{tabular}[b]") and r"\\{}[\%]" in cell
    tex = to_latex(pd.DataFrame({"SyncSGD [ms]": ["1.0"]}))
    assert r"SyncSGD\\{}[ms]" in tex  # "\\[" would read [ms] as a length


def test_reexec_latex_is_two_stacked_tables() -> None:
    table = pd.DataFrame([["wfbp", "1.0", "2.0", "3.0", "4.0"]],
                         columns=["plan", "A err %", "A err % (int.)", "B err %",
                                  "B err % (int.)"])
    tex = split_latex(table, "t")
    assert tex.count(r"\begin{tabular}{lrr}") == 2
    assert "(int.)" not in tex and "without" in tex and "with interference" in tex


def test_report_captions_are_the_papers(tmp_path) -> None:
    """workflow/report/captions/ equals what `gradsched report captions` makes of main.tex
    now: the snakemake report and the paper cannot disagree (issue 17)."""
    from pathlib import Path

    from gradsched.report.captions import paper_captions, write_captions

    repo = Path(__file__).resolve().parents[2]
    committed = repo / "workflow/report/captions"
    captions = paper_captions(repo / "paper/main.tex")
    assert len(captions) >= 20
    write_captions(repo / "paper/main.tex", tmp_path / "captions")
    fresh = {p.name: p.read_text() for p in (tmp_path / "captions").glob("*.rst")}
    ours = {p.name: p.read_text() for p in committed.glob("*.rst")}
    assert ours == fresh, ("regenerate: gradsched report captions paper/main.tex -o "
                           "workflow/report/captions")
    for filename in ("tables.rst", "replay-vs-world-size.rst", "replay-family-tables.rst"):
        assert (repo / "workflow/report" / filename).read_text() == (
            tmp_path / filename).read_text()
    assert '"cpu":' in (repo / "workflow/report/replay-vs-world-size.rst").read_text()
