"""The claims page comes from the macros; a macro that could not be computed reads n/a."""

from __future__ import annotations

from pathlib import Path

from gradsched.cli import main


def test_claims_come_from_the_macros(tmp_path: Path) -> None:
    from gradsched.report.claims import render_claims, write_claims

    text = render_claims({"MgwfbpContigGapMaxPct": "5.2", "HeadlineFastest": "Search"})
    assert "at most\n   5.2 %" in text and "schedule is\n   Search" in text
    assert "n/a" in text  # a macro the pipeline could not compute is never a number
    macros = tmp_path / "macros.tex"
    macros.write_text("\\newcommand{\\gsCompareNumWithin}{20}\n", encoding="utf-8")
    write_claims(macros, tmp_path / "claims.md")
    assert "20 of n/a checks" in (tmp_path / "claims.md").read_text(encoding="utf-8")
    assert main(["report", "claims", "--macros", str(tmp_path / "missing.tex"), "-o",
                 str(tmp_path / "c.md")]) == 2
