"""No dead definition in the package: every function, class, method, constant and attribute
defined in ``src/gradsched`` is used by the package, the workflow, the tools, the benchmarks or
a test.

The scan is vulture's (https://github.com/jendrikseipp/vulture) at 60 % confidence, over every
Python file of the repository, plus two kinds of use it cannot see: names the Snakefile and its
rule files call, and names written in a string (rank tasks are started as
``"module:function"``). What it cannot judge is listed in :data:`FRAMEWORK_NAMES`, with why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

vulture = pytest.importorskip("vulture")

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "gradsched"
PYTHON_TREES = ("src", "workflow/scripts", "tools", "benchmarks", "tests")
MIN_CONFIDENCE = 60

FRAMEWORK_NAMES = {
    "tb": "the traceback argument every __exit__ takes",
    "vmin": "matplotlib's Formatter._num_to_string signature",
    "vmax": "matplotlib's Formatter._num_to_string signature",
    "_num_to_string": "matplotlib's ScalarFormatter hook, called by matplotlib",
    "_opt_called": "torch.optim.lr_scheduler reads it to check that optimizer.step() ran",
    "_sent": "holds the pushed tensor alive until its asynchronous send completes",
}


MODULE_ATTRIBUTE_FILES = {
    "src/gradsched/workloads/llm.py": "torch.nn.Module.__setattr__ registers every submodule "
                                      "and parameter assigned; named_parameters() reads them",
}
"""Files whose attributes are read by a framework, not by name."""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def names_used_outside_python() -> set[str]:
    """Words of the Snakefile, its rule files, and every string literal of the Python files."""
    rules = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    words = set().union(*(_words(p.read_text()) for p in rules))
    for path in (p for tree in PYTHON_TREES for p in (REPO / tree).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                words |= _words(node.value)
    return words


def dead_definitions() -> list[str]:
    scan = vulture.Vulture()
    scan.scavenge([str(REPO / tree) for tree in PYTHON_TREES if (REPO / tree).is_dir()])
    used = names_used_outside_python() | set(FRAMEWORK_NAMES)
    dead = []
    for item in scan.get_unused_code(min_confidence=MIN_CONFIDENCE):
        path = Path(item.filename)
        if not path.is_relative_to(PACKAGE) or item.name in used:
            continue
        where = path.relative_to(REPO).as_posix()
        if item.typ == "attribute" and where in MODULE_ATTRIBUTE_FILES:
            continue
        dead.append(f"{where}:{item.first_lineno}: {item.message}")
    return dead


def test_the_package_has_no_dead_definition() -> None:
    dead = dead_definitions()
    assert dead == [], "defined and never used:\n" + "\n".join(dead)


def test_the_scan_finds_a_planted_dead_function(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def used():\n    return 1\n\n\ndef never_called():\n    return 2\n\n\n"
                       "print(used())\n")
    scan = vulture.Vulture()
    scan.scavenge([str(planted)])
    found = [item.name for item in scan.get_unused_code(min_confidence=MIN_CONFIDENCE)]
    assert found == ["never_called"]
