"""The import graph of ``src/gradsched``, read with :mod:`ast` (imports inside functions count).

A *unit* is a subpackage (``gradsched.replay``) or a top-level module (``gradsched.plan``).
The layering tests (``tests/test_layering.py``) check this graph against the table in
``docs/architecture.md``: no cycle between units or between modules, no unit importing one it
may not, and no import written inside a function to hide an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

TORCH_LIBRARIES = frozenset({"torch", "torchvision", "transformers"})
"""Third-party packages that may be imported inside a function: the torch stack, so that the
planners, the replay and the report never load it (``docs/architecture.md``)."""


@dataclass(frozen=True)
class Edge:
    """One import statement: ``source`` module imports ``target`` (a module or a name in it)."""

    source: str
    target: str
    path: Path
    line: int
    in_function: bool

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_name(path: Path, src: Path) -> str:
    """``src/gradsched/replay/engine.py`` -> ``gradsched.replay.engine`` (packages without
    ``.__init__``)."""
    parts = path.relative_to(src).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _function_imports(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for child in ast.walk(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    inside.add(id(child))
    return inside


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [module] + [f"{module}.{alias.name}" for alias in node.names]


def edges(src: Path) -> Iterator[Edge]:
    """Every import statement of every module under ``src/gradsched``, one edge per target
    (``from a import b`` gives ``a`` and ``a.b``: ``b`` may be a submodule)."""
    for path in sorted((src / "gradsched").rglob("*.py")):
        name = module_name(path, src)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        inside = _function_imports(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, package):
                    yield Edge(name, target, path, node.lineno, id(node) in inside)


def modules(src: Path) -> set[str]:
    return {module_name(p, src) for p in (src / "gradsched").rglob("*.py")}


def resolve(target: str, known: set[str]) -> str | None:
    """The gradsched module an import target names (``gradsched.io.read_json`` ->
    ``gradsched.io``), or None outside the package."""
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None


def unit(module: str) -> str:
    """``gradsched.replay.engine`` -> ``replay``; ``gradsched.plan`` -> ``plan``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def graph(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b in pairs:
        if a != b:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set())
    return out


def cycles(adjacency: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(sorted(adjacency[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(adjacency[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)
