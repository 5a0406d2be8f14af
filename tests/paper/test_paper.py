"""The paper: it builds with latexmk, every macro it uses is generated, and the
claims table (docs/claims.md) lists every figure and table main.tex includes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from gradsched.report import figure_style, latex, paper_macros

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "paper" / "main.tex"
FIGURE_RE = re.compile(r"\\includegraphics(?:\[[^\]]*\])?\{figures/([^}]+)\.pdf\}")
TABLE_RE = re.compile(r"\\input\{tables/([^}]+)\.tex\}")
MACRO_RE = re.compile(r"\\(gs[A-Za-z]+)")


SECTION_RE = re.compile(r"\\input\{(sections/[^}]+?)(?:\.tex)?\}")


def paper_text() -> str:
    """main.tex with each ``\\input{sections/...}`` replaced by that file's text, nested
    inputs included."""
    text = MAIN.read_text()
    while SECTION_RE.search(text):
        text = SECTION_RE.sub(
            lambda m: (REPO / "paper" / f"{m.group(1)}.tex").read_text(), text)
    return text


def included() -> tuple[set[str], set[str]]:
    text = paper_text()
    return set(FIGURE_RE.findall(text)), set(TABLE_RE.findall(text))


def accum_macro_values() -> dict[str, str]:
    """The \\gsAccum... macros of the committed accumulation / ZeRO-1 re-execution (the
    names depend on its families and k, so they come from the committed data)."""
    from gradsched.reexec.accum import analyze_accum
    from gradsched.report.reexec_accum import accum_macros

    data = REPO / "paper" / "data" / "reexec-accum"
    return accum_macros(*analyze_accum(data / "measured.csv", data / "iterations.csv"))


def at_scale_macro_names() -> set[str]:
    """The \\gsAtScale... and \\gsOverlap... macros (their generators' names, any data)."""
    from gradsched.report.at_scale import DECOMPOSE_MACROS, MACROS
    from gradsched.report.hsdp import macro_names as hsdp_macro_names
    from gradsched.report.overlap_slowdown import overlap_macros

    return ({f"AtScale{name}" for name in MACROS} | set(overlap_macros(None))
            | {f"AtScaleDecomp{name}" for name in DECOMPOSE_MACROS} | hsdp_macro_names())


def scaling_macro_names() -> dict[str, str]:
    """The \\gsScaling... macros the scaling check writes for the committed spec (n/a)."""
    from gradsched.experiments.scaling import load_spec
    from gradsched.report.scaling import MACRO_FIELDS

    cases = load_spec(REPO / "config" / "published-scaling.yaml", REPO)
    return {f"Scaling{latex.camel(c.key)}{suffix}": latex.NA
            for c in cases for suffix in MACRO_FIELDS}


def claims_table(readme: Path) -> list[dict[str, str]]:
    """Rows of the claims table (docs/claims.md) (the Markdown table whose header has 'claim')."""
    rows, header = [], None
    for line in readme.read_text().splitlines():
        if not line.startswith("|"):
            if header and rows:
                break
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            if cells and cells[0].lower().startswith("claim"):
                header = [c.lower() for c in cells]
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def test_main_tex_includes_every_figure_and_table() -> None:
    figs, tabs = included()
    assert figs == {
        "fit-curves", "fit-mape", "replay-vs-world-size-cpu", "replay-vs-world-size-k80",
        "replay-vs-world-size-v100", "replay-vs-world-size-a100-gh200", "gpu-generations",
        "timeline", "gaps",
        "collectives-time-vs-size", "collectives-lp-invariance", "collectives-lp-rhd-ratio",
        "compression-accuracy-vs-step", "compression-accuracy-vs-time", "compression-bytes",
        "reexec",
    }
    assert tabs == {
        "reexec-summary", "reexec-stock-ddp", "topology-replay", "ps-replay", "architectures",
        "sharded", "sharded-measured", "llm-scale", "reexec-accum", "reexec-accum-summary",
        "captured-compute", "captured-comm", "fits", "crossws", "replay", "compare", "forward",
        "headline-models",
        "topology",
        "replay-v100", "replay-a100-gh200", "replay-h200", "gpu-scaling", "host-check",
        "collectives-summary", "collectives-broadcast", "collectives-formula-errors",
        "compression-summary", "reexec", "collectives-at-scale", "overlap-slowdown",
        "stragglers", "stragglers-ep", "at-scale", "at-scale-variants", "at-scale-effects",
        "at-scale-decompose",
        "diagnose-collectives", "diagnose-planted", "sharded-dtypes", "hsdp",
        "accumulation-modes", "fsdp-rival", "fsdp-rival-measured",
    }


def test_readme_claims_table_lists_every_included_output() -> None:
    rows = claims_table(REPO / "docs" / "claims.md")
    assert rows, ("docs/claims.md has no claims table (a Markdown table whose first column "
                  "is 'claim')")
    text = " ".join(row.get("output", "") for row in rows)
    figs, tabs = included()
    for fig in figs:
        assert f"paper/figures/{fig}.pdf" in text, f"figure {fig} missing from the claims table"
    for tab in tabs:
        assert f"paper/tables/{tab}.tex" in text, f"table {tab} missing from the claims table"
    for row in rows:
        for key in ("target", "command", "expected time", "hardware"):
            assert row.get(key), f"claims row {row} lacks '{key}'"


def test_paper_readme_lists_every_generated_output() -> None:
    text = (REPO / "paper" / "README.md").read_text()
    figs, tabs = included()
    for name in figs:
        assert f"figures/{name}" in text
    for name in tabs:
        assert f"tables/{name}" in text
    assert "generated/macros.tex" in text


def test_every_macro_in_the_prose_is_generated() -> None:
    used = set(MACRO_RE.findall(paper_text()))
    # names the generator writes even without data (n/a), plus provide-command fallbacks
    written = {latex.PREFIX + name for name in
               paper_macros.all_macros() | scaling_macro_names() | accum_macro_values()
               | dict.fromkeys(at_scale_macro_names())}
    provided = set(re.findall(r"\\(?:providecommand|newcommand|newsavebox)\{?\\(gs[A-Za-z]+)",
                              paper_text()))  # defined by the paper itself (\\gsfit)
    missing = used - written - provided
    assert not missing, f"macros used in main.tex but never generated: {sorted(missing)}"


def test_no_number_typed_into_the_prose() -> None:
    """Results come from macros: no percentages or speedups typed by hand in the prose."""
    body = paper_text().split(r"\begin{document}", 1)[1]
    body = body.split(r"\appendix", 1)[0]
    for pattern in (r"\d+(\.\d+)?\s*\\,?\\%", r"\d+\.\d+\s*\$\\times\$"):
        for match in re.finditer(pattern, body):
            context = body[max(0, match.start() - 60): match.end()]
            # tolerances are stated settings of the check, and numbers that other papers
            # report are citations; neither is a result of ours
            assert "tolerance" in context or " report " in context, (
                f"hand-typed number in the prose: {context!r}")


def _stub_generated(paper: Path) -> None:
    """Figures, tables and macros as the pipeline writes them when it has NO data."""
    for name in included()[0]:
        figure_style.placeholder(paper / "figures" / f"{name}.pdf",
                                 paper / "figures" / f"{name}.png", name, "test stub")
    for name in included()[1]:
        latex.write_table(pd.DataFrame({"a [s]": ["1.0"], "b": ["x_y"]}),
                           paper / "tables" / f"{name}.tex", paper / "tables" / f"{name}.md")
    latex.write_macros(paper / "generated" / "macros.tex", paper_macros.all_macros())
    latex.write_macros(paper / "generated" / "scaling-macros.tex", scaling_macro_names())
    latex.write_macros(paper / "generated" / "reexec-accum-macros.tex", accum_macro_values())
    from gradsched.report.at_scale import DECOMPOSE_MACROS
    from gradsched.report.at_scale import MACROS as AT_SCALE_MACROS
    from gradsched.report.overlap_slowdown import overlap_macros

    latex.write_macros(paper / "generated" / "overlap-macros.tex", overlap_macros(None))
    latex.write_macros(paper / "generated" / "at-scale-macros.tex",
                       {f"AtScale{name}": latex.NA for name in AT_SCALE_MACROS})
    latex.write_macros(paper / "generated" / "at-scale-decompose-macros.tex",
                       {f"AtScaleDecomp{name}": latex.NA for name in DECOMPOSE_MACROS})
    from gradsched.report.hsdp import macro_names as hsdp_macro_names

    latex.write_macros(paper / "generated" / "hsdp-macros.tex",
                       dict.fromkeys(hsdp_macro_names(), latex.NA))


@pytest.mark.slow
def test_pdf_builds(tmp_path: Path) -> None:
    if shutil.which("latexmk") is None:
        pytest.skip("latexmk is not installed (make tex installs it)")
    paper = tmp_path / "paper"
    paper.mkdir()
    shutil.copy2(MAIN, paper / "main.tex")
    shutil.copytree(REPO / "paper" / "sections", paper / "sections")
    shutil.copy2(REPO / "paper" / "references.bib", paper / "references.bib")
    _stub_generated(paper)
    proc = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=paper, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    pdf = paper / "main.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 10_000
    log = (paper / "main.log").read_text(errors="replace")
    from gradsched.report.latexlog import problems

    assert problems(log) == []  # no float off its page, no undefined reference/citation
