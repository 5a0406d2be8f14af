"""gradsched.pipeline stays light: it imports only the common layer of the package."""

from __future__ import annotations

import ast
from pathlib import Path

import gradsched.pipeline

COMMON = {"errors", "io", "schema_check", "limits", "names", "networks", "units", "pipeline"}


def test_pipeline_imports_only_the_common_layer() -> None:
    for path in sorted(Path(gradsched.pipeline.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "gradsched":
                    assert len(parts) > 1 and parts[1] in COMMON, f"{path.name}: {name}"
