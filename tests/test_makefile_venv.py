"""The Makefile installs only into a venv it created for this clone.

A clone whose ``.venv`` is a link to another clone's venv (or any venv make did not create
here) must not re-install into it: ``pip install -e .`` would re-point the shared editable
install at this clone, and the stamp's age depends on this clone's file times. The runs
below use a stand-in interpreter (a shell script that creates a stand-in venv for ``-m venv``
and logs every ``-m pip`` call), so nothing is installed anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")

STUB = """#!/bin/bash
# stand-in python: `-m venv DIR` makes DIR/bin/python (this script); `-m pip ...` is logged;
# tools/venv_editable_root.py prints $FAKE_EDITABLE_ROOT (where the editable install points)
if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
if [ "$1" = -m ] && [ "$2" = pip ]; then
  echo "$(cd "$(dirname "$0")/.." && pwd -P): $*" >> "$PIP_LOG"; exit 0; fi
case "$1" in
  *venv_editable_root.py) [ -n "$FAKE_EDITABLE_ROOT" ] && echo "$FAKE_EDITABLE_ROOT";;
esac
exit 0
"""


def _clone(root: Path) -> Path:
    """A folder with the Makefile and the files its venv rule reads."""
    root.mkdir(parents=True)
    for name in ("Makefile", "requirements.lock", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    (root / "tools").mkdir()
    shutil.copy2(REPO / "tools" / "venv_editable_root.py", root / "tools")
    return root.resolve()


def _stub(tmp_path: Path) -> Path:
    stub = tmp_path / "python3-stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    return stub


def _make(clone: Path, stub: Path, log: Path, editable: str = "") -> str:
    env = {**os.environ, "PIP_LOG": str(log), "FAKE_EDITABLE_ROOT": editable}
    run = subprocess.run(["make", "--no-print-directory", "env", f"PYTHON={stub}"],
                         cwd=clone, env=env, capture_output=True, text=True, check=False,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def _touch_newer(*paths: Path) -> None:
    later = time.time() + 10
    for path in paths:
        os.utime(path, (later, later))


def test_a_venv_make_creates_is_installed_into_and_refreshed(tmp_path):
    clone, stub, log = _clone(tmp_path / "clone"), _stub(tmp_path), tmp_path / "pip.log"
    _make(clone, stub, log)
    assert (clone / ".venv" / ".gradsched-owner").read_text().strip() == str(clone)
    assert (clone / ".venv" / ".gradsched-installed").is_file()
    first = log.read_text().splitlines()
    assert any("install -q -r requirements.lock" in line for line in first)
    _touch_newer(clone / "requirements.lock")  # the lock changed: make installs again
    _make(clone, stub, log)
    assert len(log.read_text().splitlines()) > len(first)


def test_a_linked_venv_of_another_clone_is_used_as_it_is(tmp_path):
    stub, log = _stub(tmp_path), tmp_path / "pip.log"
    main = _clone(tmp_path / "main")
    _make(main, stub, log)  # main's own venv, made by make
    installed = log.read_text()
    clone = _clone(tmp_path / "clone")
    (clone / ".venv").symlink_to(main / ".venv")
    _touch_newer(clone / "requirements.lock", clone / "pyproject.toml")  # a fresh clone's times
    out = _make(clone, stub, log, editable=str(main))
    assert "not created by make for this clone" in out
    assert log.read_text() == installed  # nothing installed into main's venv
    assert (main / ".venv" / ".gradsched-owner").read_text().strip() == str(main)


def test_a_venv_of_an_earlier_makefile_is_adopted_and_a_foreign_one_is_not(tmp_path):
    stub, log = _stub(tmp_path), tmp_path / "pip.log"
    clone = _clone(tmp_path / "clone")
    (clone / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(stub, clone / ".venv" / "bin" / "python")
    # made by hand (or for another folder): its editable gradsched points elsewhere
    out = _make(clone, stub, log, editable=str(tmp_path / "elsewhere"))
    assert "not created by make for this clone" in out and not log.exists()
    assert not (clone / ".venv" / ".gradsched-owner").exists()
    # made by an earlier Makefile here: its editable install is this clone
    _make(clone, stub, log, editable=str(clone))
    assert (clone / ".venv" / ".gradsched-owner").read_text().strip() == str(clone)
    assert log.read_text().startswith(str(clone))
