"""CI runs every legibility test: a skip for a missing program fails under ``GRADSCHED_CI``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAPER_TOOLS = ("latexmk", "pdftohtml", "pdftotext", "pdfinfo", "pdffonts", "pdftoppm")
"""The programs the paper's build and legibility tests run."""

PLANTED = '''
import pytest

@pytest.mark.skipif(True, reason="pdfsomething (poppler-utils) is not installed")
def test_needs_a_tool():
    pass

def test_skips_for_another_reason():
    pytest.skip("paper/main.pdf is not built")
'''


def _run_planted(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess:
    (tmp_path / "tests").mkdir()
    shutil.copy2(REPO / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_planted.py").write_text(PLANTED)
    env = {k: v for k, v in os.environ.items() if k != "GRADSCHED_CI"}
    if ci:
        env["GRADSCHED_CI"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-p", "no:randomly", "tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_missing_tool_skip_fails_under_ci(tmp_path: Path) -> None:
    proc = _run_planted(tmp_path, ci=True)
    assert proc.returncode != 0, proc.stdout
    assert "CI must run this test" in proc.stdout
    assert "1 skipped" in proc.stdout, proc.stdout  # the other reason still skips


def test_a_missing_tool_skip_only_skips_outside_ci(tmp_path: Path) -> None:
    proc = _run_planted(tmp_path, ci=False)
    assert proc.returncode == 0, proc.stdout
    assert "2 skipped" in proc.stdout, proc.stdout


def test_ci_sets_the_flag_and_make_test_installs_the_tools() -> None:
    assert "export GRADSCHED_CI=1" in (REPO / ".ci" / "run").read_text()
    makefile = (REPO / "Makefile").read_text()
    assert "poppler-utils" in makefile
    assert "snakefmt --check" in makefile.split("\ntest:")[1].split("\n\n")[0]


@pytest.mark.skipif(not os.environ.get("GRADSCHED_CI"), reason="outside CI the tools are optional")
def test_ci_has_every_paper_tool() -> None:
    assert [t for t in PAPER_TOOLS if shutil.which(t) is None] == []
