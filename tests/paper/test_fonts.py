"""Text in the built paper is readable in print: no text under 6 pt.

The check reads ``pdftohtml -xml`` (poppler-utils) of ``paper/main.pdf``, which gives each
run of text with its font and the font's size in points (at ``-zoom 3``: a third of a point
resolution). ``pdftotext -bbox-layout``'s word boxes were tried first and do not measure the
size: their height is the font's ascent plus descent (1.165 x the size for DejaVu Sans,
matplotlib's font, 0.89 x for the paper's Times) and, in a sideways table, the word's width.

Figure text (matplotlib's DejaVu fonts) is held to 6 pt without exception, tick-label
exponents included. In the LaTeX text, a run under 6 pt directly beside a run at least
:data:`SCRIPT_RATIO` times its size is a sub- or superscript (of body math, or of a 7 pt
table's math) and is not a failure. pdftohtml misreads the size of Type 3 fonts (a 4 pt
matplotlib Type 3 run reads 6.7 pt), so the paper must embed none: figures are saved with
``pdf.fonttype`` 42 (TrueType), and :func:`test_paper_has_no_type3_fonts` checks it.

The real PDF is built by ``make reproduce`` (the workflow's ``paper_pdf`` rule); this test
builds nothing and skips, saying why, when that PDF is absent or older than a figure it
includes. ``tests/paper/test_paper.py::test_pdf_builds`` builds a stub PDF, which says
nothing about the real figures.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PDF = REPO / "paper" / "main.pdf"
MIN_PT = 6.0
SCRIPT_RATIO = 1.3
ZOOM = 3
FIGURE_FONT = "DejaVu"
_PAGE_RE = re.compile(r'<page number="(\d+)"[^>]*>(.*?)</page>', re.S)
_FONT_RE = re.compile(r'<fontspec id="(\d+)" size="(\d+)" family="([^"]*)"')
_TEXT_RE = re.compile(r'<text top="(-?\d+)" left="(-?\d+)" width="(-?\d+)" height="(-?\d+)" '
                      r'font="(\d+)">(.*?)</text>', re.S)

needs_poppler = pytest.mark.skipif(shutil.which("pdftohtml") is None,
                                   reason="pdftohtml (poppler-utils) is not installed")


@dataclass(frozen=True)
class Run:
    """One run of text: page, box (``-zoom 3`` pixels), size in points, font, text."""

    page: int
    top: int
    left: int
    width: int
    height: int
    size_pt: float
    font: str
    text: str


def text_runs(pdf: Path) -> list[Run]:
    """Every run of text in ``pdf`` with its font size (``pdftohtml -xml``)."""
    xml = subprocess.run(["pdftohtml", "-xml", "-i", "-stdout", "-zoom", str(ZOOM), str(pdf)],
                         check=True, capture_output=True, text=True).stdout
    fonts = {m[0]: (int(m[1]) / ZOOM, m[2]) for m in _FONT_RE.findall(xml)}
    runs = []
    for number, body in _PAGE_RE.findall(xml):
        for top, left, width, height, font, text in _TEXT_RE.findall(body):
            size, family = fonts[font]
            runs.append(Run(int(number), int(top), int(left), int(width), int(height),
                            round(size, 1), family,
                            html.unescape(re.sub(r"<[^>]+>", "", text)).strip()))
    return runs


def _is_script(run: Run, page: list[Run]) -> bool:
    """A LaTeX run directly beside (3 px) a run :data:`SCRIPT_RATIO` times its size."""
    for other in page:
        if other.size_pt < SCRIPT_RATIO * run.size_pt:
            continue
        beside = (abs(other.left + other.width - run.left) <= 3
                  or abs(run.left + run.width - other.left) <= 3)
        overlap = run.top < other.top + other.height and other.top < run.top + run.height
        if beside and overlap:
            return True
    return False


def small_words(pdf: Path, min_pt: float = MIN_PT) -> list[Run]:
    """Every run of ``pdf`` under ``min_pt``: all figure text, and LaTeX text that is not
    a sub- or superscript."""
    runs = [r for r in text_runs(pdf) if r.text]
    pages: dict[int, list[Run]] = {}
    for run in runs:
        pages.setdefault(run.page, []).append(run)
    return [r for r in runs if r.size_pt < min_pt
            and (FIGURE_FONT in r.font or not _is_script(r, pages[r.page]))]


def _figure_pdf(path: Path, size_pt: float, superscript: bool = False) -> Path:
    """A one-line matplotlib PDF with text at ``size_pt`` (or a 10^3 tick-like label)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["pdf.fonttype"] = 42  # as figures.setup_style: TrueType, not Type 3
    fig = plt.figure(figsize=(3, 1.5))
    if not superscript:
        fig.text(0.1, 0.5, "legend entry", fontsize=size_pt)
    else:
        fig.text(0.1, 0.2, r"$10^{3}$", fontsize=size_pt)
    fig.savefig(path, format="pdf", metadata={"CreationDate": None})
    plt.close(fig)
    return path


@needs_poppler
def test_check_fails_on_4pt_text(tmp_path: Path) -> None:
    found = small_words(_figure_pdf(tmp_path / "small.pdf", 4))
    assert [(w.text, w.size_pt) for w in found] == [("legend entry", 4.0)]


@needs_poppler
def test_check_fails_on_a_figure_superscript_under_6pt(tmp_path: Path) -> None:
    found = small_words(_figure_pdf(tmp_path / "exp.pdf", 8, superscript=True))
    assert [(w.text, w.size_pt) for w in found] == [("3", 5.7)]


@needs_poppler
def test_check_passes_7pt_text(tmp_path: Path) -> None:
    assert small_words(_figure_pdf(tmp_path / "ok.pdf", 7)) == []


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
        f"page {w.page} {w.text!r} {w.size_pt} pt ({w.font})" for w in found[:30])


@needs_poppler
def test_paper_has_a_title_and_author() -> None:
    info = subprocess.run(["pdfinfo", str(_built_paper())], check=True, capture_output=True,
                          text=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    assert fields.get("Title", "").strip(), "the PDF has no title (\\hypersetup pdftitle)"
    assert fields.get("Author", "").strip(), "the PDF has no author (\\hypersetup pdfauthor)"


@needs_poppler
def test_paper_has_no_type3_fonts() -> None:
    fonts = subprocess.run(["pdffonts", str(_built_paper())], check=True, capture_output=True,
                           text=True).stdout
    type3 = [line for line in fonts.splitlines()[2:] if " Type 3 " in line]
    assert not type3, "Type 3 fonts (their size cannot be checked): " + "; ".join(type3)
