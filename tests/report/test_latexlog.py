"""Problems in the LaTeX log (floats too large, undefined references, overfull boxes) fail
the build."""

from __future__ import annotations

from pathlib import Path

from gradsched.cli import main


def test_latex_log_problems_fail_the_build(tmp_path: Path, capsys) -> None:
    from gradsched.report.latexlog import problems

    log = ("LaTeX Warning: Float too large for page by 289.91199pt on input line 329.\n"
           "LaTeX Warning: Reference `fig:x' on page 3 undefined on input line 12.\n"
           "LaTeX Warning: There were undefined references.\n"
           "Overfull \\hbox (1.2pt too wide) in paragraph at lines 1--2\n")
    assert len(problems(log)) == 3
    assert problems("LaTeX Warning: Label(s) may have changed.\n") == []
    path = tmp_path / "main.log"
    path.write_text(log, encoding="utf-8")
    assert main(["report", "latex-check", str(path)]) == 2
    assert "Float too large" in capsys.readouterr().err
    path.write_text("clean\n", encoding="utf-8")
    assert main(["report", "latex-check", str(path)]) == 0
