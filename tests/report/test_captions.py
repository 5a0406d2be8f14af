"""The report captions are the paper's."""

from __future__ import annotations


def test_report_captions_are_the_papers(tmp_path) -> None:
    """workflow/report/captions/ equals what `gradsched report captions` makes of main.tex
    now: the snakemake report and the paper cannot disagree."""
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
