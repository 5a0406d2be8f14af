"""Text in the built paper is readable in print: no word under 6 pt.

The check reads ``pdftotext -bbox-layout`` (poppler) of ``paper/main.pdf``: a word's height
is its box's height, and its size in points is that height over :data:`HEIGHT_PER_PT`
(DejaVu Sans, matplotlib's font, measured: a 10 pt word is 11.65 pt high, a 4 pt word
4.66 pt). Every word of every page is checked (figures are vector PDFs, so their text is
text); a small word whose line also holds a word :data:`SCRIPT_RATIO` times taller is a
sub- or superscript (body math, a tick label's exponent) and is not a failure.

The real PDF is built by ``make reproduce`` (the workflow's ``paper_pdf`` rule); this test
builds nothing and skips, saying why, when that PDF is absent or older than a figure it
includes. ``tests/paper/test_paper.py::test_pdf_builds`` builds a stub PDF, which says
nothing about the real figures.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PDF = REPO / "paper" / "main.pdf"
MIN_PT = 6.0
HEIGHT_PER_PT = 1.165
SCRIPT_RATIO = 1.3
_LINE_RE = re.compile(r"<line [^>]*>(.*?)</line>", re.S)
_WORD_RE = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" '
                      r'yMax="([\d.]+)">(.*?)</word>')
_PAGE_RE = re.compile(r"<page [^>]*>(.*?)</page>", re.S)

needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None,
                                   reason="pdftotext (poppler-utils) is not installed")


@dataclass(frozen=True)
class SmallWord:
    page: int
    text: str
    size_pt: float


def small_words(pdf: Path, min_pt: float = MIN_PT) -> list[SmallWord]:
    """Every word of ``pdf`` under ``min_pt`` that is not a sub- or superscript."""
    xml = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], check=True,
                         capture_output=True, text=True).stdout
    out = []
    for page, body in enumerate(_PAGE_RE.findall(xml), start=1):
        for line in _LINE_RE.findall(body):
            words = [(float(m[3]) - float(m[1]), m[4]) for m in _WORD_RE.findall(line)]
            tallest = max((h for h, _ in words), default=0.0)
            for height, text in words:
                size = height / HEIGHT_PER_PT
                if size < min_pt and tallest < SCRIPT_RATIO * height:
                    out.append(SmallWord(page, text, round(size, 1)))
    return out


def _figure_pdf(path: Path, size_pt: float, superscript: bool = False) -> Path:
    """A one-line matplotlib PDF with text at ``size_pt`` (and a 10^3 tick-like label)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(3, 1.5))
    fig.text(0.1, 0.5, "legend entry", fontsize=size_pt)
    if superscript:
        fig.text(0.1, 0.2, r"$10^{3}$", fontsize=8)
    fig.savefig(path, format="pdf", metadata={"CreationDate": None})
    plt.close(fig)
    return path


@needs_poppler
def test_check_fails_on_4pt_text(tmp_path: Path) -> None:
    found = small_words(_figure_pdf(tmp_path / "small.pdf", 4))
    assert {w.text for w in found} == {"legend", "entry"}
    assert all(3.5 <= w.size_pt <= 4.5 for w in found)


@needs_poppler
def test_check_passes_7pt_text_and_a_superscript(tmp_path: Path) -> None:
    assert small_words(_figure_pdf(tmp_path / "ok.pdf", 7, superscript=True)) == []


def _built_paper() -> Path:
    if not PDF.is_file():
        pytest.skip("paper/main.pdf is not built (make reproduce builds it with TeX)")
    figures = [p for p in (REPO / "paper" / "figures").glob("*.pdf")]
    if any(p.stat().st_mtime > PDF.stat().st_mtime for p in figures):
        pytest.skip("paper/main.pdf is older than a figure: rebuild it (make reproduce)")
    return PDF


@needs_poppler
def test_paper_has_no_text_under_6pt() -> None:
    found = small_words(_built_paper())
    assert not found, "text under 6 pt: " + "; ".join(
        f"page {w.page} {w.text!r} {w.size_pt} pt" for w in found[:30])


@needs_poppler
def test_paper_has_a_title_and_author() -> None:
    info = subprocess.run(["pdfinfo", str(_built_paper())], check=True, capture_output=True,
                          text=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    assert fields.get("Title", "").strip(), "the PDF has no title (\\hypersetup pdftitle)"
    assert fields.get("Author", "").strip(), "the PDF has no author (\\hypersetup pdfauthor)"
