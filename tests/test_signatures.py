"""No function in ``src/`` takes more than :data:`MAX_PARAMETERS` parameters: a set of
settings travels as one frozen, typed object, built and checked once where the command
parses its arguments (``docs/architecture.md``). Counted: positional and keyword-only
parameters, without ``self``/``cls`` and without ``*args``/``**kwargs``; a dataclass's
generated ``__init__`` is not in the source and is not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

MAX_PARAMETERS = 8

ALLOWED: dict[str, str] = {}
"""Functions still over the limit, each with the reason it has not been folded yet; the list
only shrinks (a function leaving it must be removed from it, see
:func:`test_the_allow_list_only_names_functions_over_the_limit`)."""


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Positional and keyword-only parameters of ``node``, less a leading ``self``/``cls``."""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names)


def wide_functions(src: Path = SRC) -> dict[str, int]:
    """``module:qualified.name`` -> parameter count, for every function over the limit."""
    found: dict[str, int] = {}
    for path in sorted((src / "gradsched").rglob("*.py")):
        module = ".".join(path.relative_to(src).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

        _visit(tree, f"{module}:", found)
    return found


def _visit(node: ast.AST, prefix: str, found: dict[str, int]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            count = parameter_count(child)
            if count > MAX_PARAMETERS:
                found[name] = count
            _visit(child, f"{name}.", found)
        elif isinstance(child, ast.ClassDef):
            _visit(child, f"{prefix}{child.name}.", found)
        else:
            _visit(child, prefix, found)


def test_no_function_takes_more_than_eight_parameters() -> None:
    over = {name: n for name, n in wide_functions().items() if name not in ALLOWED}
    assert over == {}, "\n".join(f"{name}: {n} parameters" for name, n in sorted(over.items()))


def test_the_allow_list_only_names_functions_over_the_limit() -> None:
    stale = sorted(set(ALLOWED) - set(wide_functions()))
    assert stale == [], f"no longer over the limit, remove from ALLOWED: {stale}"


def test_the_count_finds_a_planted_wide_function(tmp_path: Path) -> None:
    package = tmp_path / "gradsched"
    package.mkdir()
    (package / "wide.py").write_text(
        "class A:\n"
        "    def m(self, a, b, c, d, e, f, g, h, *args, **kw): ...\n"
        "    def n(self, a, b, c, d, e, f, g, h, *, i): ...\n"
        "def g(a, /, b, c, d, e, f, g, h, i=1): ...\n")
    assert wide_functions(tmp_path) == {"gradsched.wide:A.n": 9, "gradsched.wide:g": 9}
