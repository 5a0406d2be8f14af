"""The claims page comes from the macros; a macro that could not be computed reads n/a."""

from __future__ import annotations

from pathlib import Path

from gradsched.cli import main


def test_claims_come_from_the_macros(tmp_path: Path) -> None:
    from gradsched.report.claims import render_claims, write_claims

    text = render_claims({"MgwfbpContigGapMaxPct": "5.2", "HeadlineFastest": "Search"})
    assert "at most 5.2 %" in text and "schedule is\n   Search" in text
    assert "n/a" in text  # a macro the pipeline could not compute is never a number
    macros = tmp_path / "macros.tex"
    macros.write_text("\\newcommand{\\gsCompareReproNumWithin}{2}\n", encoding="utf-8")
    write_claims(macros, tmp_path / "claims.md")
    assert "2 of\n   n/a fall within" in (tmp_path / "claims.md").read_text(encoding="utf-8")
    assert main(["report", "claims", "--macros", str(tmp_path / "missing.tex"), "-o",
                 str(tmp_path / "c.md")]) == 2


def test_every_claim_field_is_a_macro_the_report_writes() -> None:
    """A misspelt field would print n/a for ever: every ``{Name}`` of the template is a key
    that ``all_macros`` writes (as n/a without inputs)."""
    from gradsched.report.claims import _FIELD, TEMPLATE
    from gradsched.report.paper_macros import all_macros

    written = set(all_macros())
    assert sorted(set(_FIELD.findall(TEMPLATE)) - written) == []


def test_claim_five_counts_only_intervals_that_exclude_one() -> None:
    from gradsched.report.claims import render_claims

    text = render_claims({"ReexecBestVsDefaultList": "x: 1.01 [0.98, 1.02]",
                          "ReexecBestVsDefaultFasterCases": "0"})
    assert "Against PyTorch DDP's default: x: 1.01 [0.98, 1.02]" in text
    assert "where the interval excludes 1" in text and "(faster in 0 of" in text
