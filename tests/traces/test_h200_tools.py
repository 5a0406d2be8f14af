"""The H200 maintainer tools (tools/h200_correct.py, h200_kineto_report.py,
h200_host_traces.py) regenerate what they committed byte for byte, and workflow/scripts/
holds only scripts a rule runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _tool(name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, str(REPO / "tools" / name), "--check"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def test_corrected_h200_bundles_reproduce() -> None:
    proc = _tool("h200_correct.py")
    assert proc.returncode == 0, proc.stderr
    assert "19 of 19 files reproduced byte for byte" in proc.stdout


@pytest.mark.slow
def test_h200_kineto_import_report_reproduces() -> None:
    proc = _tool("h200_kineto_report.py")
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 reports reproduced byte for byte" in proc.stdout


@pytest.mark.slow
def test_h200_host_traces_reproduce() -> None:
    proc = _tool("h200_host_traces.py")
    assert proc.returncode == 0, proc.stderr
    assert "36 of 36 files reproduced byte for byte" in proc.stdout


def test_every_workflow_script_is_run_by_a_rule() -> None:
    rules = "\n".join(p.read_text(encoding="utf-8")
                      for p in (REPO / "workflow" / "rules").glob("*.smk"))
    run = set(re.findall(r"\.\./scripts/([\w.-]+\.py)", rules))
    shipped = {p.name for p in (REPO / "workflow" / "scripts").glob("*.py")}
    assert shipped - run == set()
