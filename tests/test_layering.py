"""The package's shape: data flows one way (``docs/architecture.md``).

Imports written inside functions count as edges: moving an import into a function hides a
cycle from Python's import machinery, not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.layering import TORCH_LIBRARIES, Edge, cycles, edges, graph, modules, resolve, unit

SRC = Path(__file__).resolve().parents[1] / "src"

COMMON = frozenset({"errors", "io", "staging", "signal_hold", "run_order", "limits", "networks",
                    "units", "provenance", "plan", "plan_sharded", "names", "intermediates",
                    "admission", "ties", "gpus", "printable", "procfs", "readback",
                    "llm_shapes", "streams", "schema_check", "collective_dtypes",
                    "plan_mesh"})
"""The common ground every unit may import. ``llm_shapes``: published LLM dimensions and
their parameter list without torch, read by the model zoo, the FLOPs model (traces) and the
at-scale study (experiments), as ``gpus`` holds the GPUs' published peaks."""

ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "limits": frozenset(),
    "procfs": frozenset({"errors"}),
    "io": frozenset({"errors", "procfs", "streams"}),
    "readback": frozenset({"errors", "io", "limits", "schema_check"}),
    "schema_check": frozenset({"errors", "io"}),
    "staging": frozenset({"errors", "io", "signal_hold", "streams"}),
    "signal_hold": frozenset(),
    "run_order": frozenset(),
    "units": frozenset({"errors", "limits"}),
    "networks": frozenset({"errors"}),
    "names": frozenset({"errors"}),
    "intermediates": frozenset({"errors", "io"}),
    "provenance": frozenset({"errors", "io", "procfs"}),
    "plan": frozenset({"errors", "io", "limits"}),
    "plan_sharded": frozenset({"errors", "io", "collective_dtypes", "plan_mesh"}),
    "collective_dtypes": frozenset({"errors"}),
    "plan_mesh": frozenset({"errors"}),
    "admission": frozenset({"errors", "io", "procfs"}),
    "ties": frozenset(),
    "gpus": frozenset(),
    "llm_shapes": frozenset({"errors", "io"}),  # its committed configs through the input gate
    "printable": frozenset(),
    "streams": frozenset({"errors"}),
    "traces": COMMON,
    "costmodel": COMMON | {"traces"},
    "planners": COMMON | {"traces", "costmodel"},
    "replay": COMMON | {"traces", "costmodel"},
    "experiments": COMMON | {"traces", "costmodel", "planners", "replay", "compression"},
    "workloads": COMMON,
    "distributed": COMMON,
    "pipeline": COMMON,
    "capture": COMMON | {"traces", "workloads", "distributed"},
    "collectives": COMMON | {"traces", "costmodel", "distributed", "capture"},  # its timer
    "compression": COMMON | {"costmodel", "distributed"},
    "runtime": COMMON | {"traces", "costmodel", "planners", "workloads", "distributed",
                         "collectives", "compression", "capture"},
    "reexec": COMMON | {"traces", "costmodel", "planners", "replay", "experiments",
                        "workloads", "distributed", "capture", "runtime"},
    "report": COMMON | {"traces", "costmodel"},
    "diagnose": COMMON | {"traces", "costmodel", "replay"},
}
"""Which units each unit may import (besides itself); ``commands``, ``cli`` and ``__main__`` sit
on top and may import any unit."""

TOP = frozenset({"commands", "cli", "__main__"})

DECLARATIONS: dict[str, frozenset[str]] = {
    "report": frozenset({"gradsched.reexec.items"}),
}
"""Modules of a unit outside ``ALLOWED`` that a unit may still import, because they only
declare names (no computation): the report reads the re-execution's item names."""

COMPUTING: dict[str, frozenset[str]] = {
    "report": frozenset({"gradsched.costmodel.fit", "gradsched.costmodel.crossws",
                        "gradsched.costmodel.topology_fit"}),
}
"""Modules of an allowed unit that a unit may still not import, because they compute: the
report loads and draws fitted models but never fits one. With ``ALLOWED``, the report's rule:
it formats the frames it is given and imports no fitting, planning, replay, experiment or
re-execution analysis (the commands compute the frames and pass them in)."""

ROOT = "gradsched"
"""The package itself holds only ``__version__``: any unit may read it."""

LAZY_LIBRARIES = frozenset({"matplotlib", "seaborn", "scipy", "sklearn"})
"""Heavy third-party libraries one code path needs (plotting, fitting, the digits data set):
a function may import them so that every other command starts without them."""

LAZY_IMPORT_UNITS = frozenset({"commands", "cli"})
"""Units whose functions may import inside themselves: each CLI verb loads only what it runs."""


def _internal_edges(src: Path = SRC) -> list[tuple[Edge, str]]:
    known = modules(src)
    out = []
    for edge in edges(src):
        target = resolve(edge.target, known)
        if target is not None and target not in (edge.source, ROOT):
            out.append((edge, target))
    return out


def _torch_bound(src: Path = SRC) -> set[str]:
    """Modules that import the torch stack at their top level: importing one loads torch."""
    bound = set()
    for edge in edges(src):
        if not edge.in_function and edge.target.split(".")[0] in TORCH_LIBRARIES:
            bound.add(edge.source)
    return bound


def test_no_cycle_between_units() -> None:
    pairs = [(unit(e.source), unit(t)) for e, t in _internal_edges()]
    assert cycles(graph(pairs)) == []


def test_no_cycle_between_modules() -> None:
    """Finer than units: two modules of one subpackage never import each other either
    (a package's ``__init__`` re-exporting its modules is not an edge back)."""
    pairs = [(e.source, t) for e, t in _internal_edges()
             if not (e.source == t.rpartition(".")[0] or t == e.source.rpartition(".")[0])]
    assert cycles(graph(pairs)) == []


def _wrong_imports(src_root: Path = SRC) -> list[str]:
    """Every import a unit may not make (``ALLOWED``, ``DECLARATIONS``, ``COMPUTING``)."""
    wrong = []
    for edge, target in _internal_edges(src_root):
        src, dst = unit(edge.source), unit(target)
        if src == dst or src in TOP:
            continue
        if src not in ALLOWED:
            wrong.append(f"{edge.where()}: unit {src!r} is not in the layering table")
        elif dst not in ALLOWED[src] and target not in DECLARATIONS.get(src, ()):
            wrong.append(f"{edge.where()}: {src} imports {dst} ({target})")
        elif target in COMPUTING.get(src, ()):
            wrong.append(f"{edge.where()}: {src} imports computation ({target})")
    return wrong


def test_every_unit_imports_only_units_below_it() -> None:
    assert _wrong_imports() == []


def test_no_import_inside_a_function_outside_the_cli_and_torch_paths() -> None:
    """Outside ``commands/`` and ``cli``, an import inside a function is allowed only for the
    torch stack or a gradsched module that loads it (so that the light tiers -- fit, plan,
    replay, report -- never import torch) and for the heavy libraries of one code path."""
    known = modules(SRC)
    torch_bound = _torch_bound()
    hidden = []
    for edge in edges(SRC):
        if not edge.in_function or unit(edge.source) in LAZY_IMPORT_UNITS:
            continue
        if edge.target.split(".")[0] in TORCH_LIBRARIES | LAZY_LIBRARIES:
            continue
        target = resolve(edge.target, known)
        if target is not None and target in torch_bound:
            continue
        if target is None and edge.target.startswith("gradsched"):
            continue  # the name part of ``from gradsched.x import name``: its module is checked
        hidden.append(f"{edge.where()}: {edge.target}")
    assert hidden == []


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        path = src / "gradsched" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return src


@pytest.mark.parametrize("inside", [False, True], ids=["top-level", "inside-a-function"])
def test_a_planted_cycle_is_found(tmp_path: Path, inside: bool) -> None:
    """The checks above can fail: a cycle between two subpackages, one side written inside a
    function, is found."""
    back = ("def f():\n    from gradsched.planners import greedy\n" if inside
            else "from gradsched.planners import greedy\n")
    src = _plant(tmp_path, {
        "__init__.py": "",
        "planners/__init__.py": "",
        "planners/greedy.py": "from gradsched.replay.engine import replay\n",
        "replay/__init__.py": "",
        "replay/engine.py": back,
    })
    pairs = [(unit(e.source), unit(t)) for e, t in _internal_edges(src)]
    assert cycles(graph(pairs)) == [["planners", "replay"]]
    hidden = {e.where() for e in edges(src) if e.in_function}
    assert len(hidden) == (1 if inside else 0)


@pytest.mark.parametrize("inside", [False, True], ids=["top-level", "inside-a-function"])
def test_a_planted_report_import_of_computation_is_found(tmp_path: Path, inside: bool) -> None:
    """The report's rule can fail: a report module importing the re-execution's analysis or
    a model fit is refused; one reading the re-execution's item names is not."""
    analysis = ("def f():\n    from gradsched.reexec.analysis import case_stats\n" if inside
                else "from gradsched.reexec.analysis import case_stats\n")
    src = _plant(tmp_path, {
        "__init__.py": "",
        "reexec/__init__.py": "",
        "reexec/analysis.py": "",
        "reexec/items.py": "",
        "costmodel/__init__.py": "",
        "costmodel/fit.py": "",
        "costmodel/base.py": "",
        "report/__init__.py": "",
        "report/planted.py": analysis,
        "report/fitted.py": "from gradsched.costmodel.fit import fit_all\n",
        "report/named.py": ("from gradsched.reexec.items import ddp_default_label\n"
                            "from gradsched.costmodel.base import load_comm_spec\n"),
    })
    wrong = _wrong_imports(src)
    assert {Path(w.split(":")[0]).name for w in wrong} == {"planted.py", "fitted.py"}
    assert any("report imports reexec (gradsched.reexec.analysis)" in w for w in wrong)
    assert any("report imports computation (gradsched.costmodel.fit)" in w for w in wrong)


def test_cycle_finder_on_known_graphs() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]


def private_imports(root: Path) -> list[str]:
    """Every ``from gradsched.x import _name`` under ``root``: a private name used by another
    module is a seam that should be public."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradsched"):
                found += [f"{path}:{node.lineno}: {node.module}.{alias.name}"
                          for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    repo = SRC.parent
    found = [hit for tree in ("src", "workflow", "benchmarks", "tools")
             for hit in private_imports(repo / tree)]
    assert found == [], "\n".join(found)


def test_the_private_import_check_finds_a_planted_one(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from gradsched.runtime.bench import _timed\n"
                                   "from gradsched.io import read_text\n")
    assert [hit.split(": ")[1] for hit in private_imports(tmp_path)] == \
        ["gradsched.runtime.bench._timed"]


SHARDED = "gradsched.experiments.sharded"
"""The sharded solvers: one package whose problem (``common.ShardedProblem``) derives the
trace's layers and blocks once; the other members take them from it."""


def test_the_sharded_solvers_derive_the_layers_in_one_module() -> None:
    entries = sorted({e.source for e in edges(SRC)
                      if e.source.startswith(SHARDED + ".")
                      and e.target in ("gradsched.traces.layers.layer_seq",
                                       "gradsched.traces.layers.block_ranges")})
    assert entries == [f"{SHARDED}.common"]
    flat = sorted(p.name for p in (SRC / "gradsched" / "experiments").glob("sharded_*.py"))
    assert flat == [], "the sharded solvers are one package, experiments/sharded/"


REPORT_COSTMODEL_LEFT: dict[str, str] = {
    "gradsched.report.collect": "the share beyond which a replay row is mostly an "
                                "extrapolation (costmodel.domain.MOSTLY_OUTSIDE_PCT, a constant)",
    "gradsched.report.domain_macros": "the same constant, printed as a macro",
    "gradsched.report.quote_rule": "the same constant, in the quote rule's text",
    "gradsched.report.topology": "the names of the topology collectives "
                                 "(costmodel.topology.TOPOLOGY_COLLECTIVES)",
    "gradsched.report.fits_figures": "loads the fitted comm models it draws (costmodel.base."
                             "load_comm_spec); to take their curves as frames",
}
"""Report modules that still import from ``costmodel``, each with what it reads; the rule
is that ``report/`` imports nothing from it (the formulas, predictions and fits are
evaluated above, by ``experiments/`` or the command, and reach the report as frames)."""


def report_costmodel_imports(src: Path = SRC) -> dict[str, list[str]]:
    """Report module -> the ``costmodel`` modules it imports (inside functions too)."""
    known = modules(src)
    found: dict[str, set[str]] = {}
    for edge in edges(src):
        target = resolve(edge.target, known)
        if unit(edge.source) == "report" and target is not None and unit(target) == "costmodel":
            found.setdefault(edge.source, set()).add(target)
    return {name: sorted(targets) for name, targets in found.items()}


def test_report_imports_nothing_from_costmodel() -> None:
    found = report_costmodel_imports()
    new = {m: t for m, t in found.items() if m not in REPORT_COSTMODEL_LEFT}
    assert new == {}, "report/ formats frames; compute with costmodel above it"
    stale = sorted(set(REPORT_COSTMODEL_LEFT) - set(found))
    assert stale == [], f"no longer importing costmodel, remove: {stale}"


@pytest.mark.parametrize("inside", [False, True], ids=["top-level", "inside-a-function"])
def test_a_planted_report_import_of_costmodel_is_found(tmp_path: Path, inside: bool) -> None:
    """The rule above can fail: a report module evaluating a cost formula is found."""
    line = "from gradsched.costmodel.formulas import cost\n"
    src = _plant(tmp_path, {
        "__init__.py": "",
        "costmodel/__init__.py": "",
        "costmodel/formulas.py": "",
        "report/__init__.py": "",
        "report/planted.py": ("def f():\n    " + line) if inside else line,
        "report/plain.py": "import math\n",
    })
    assert report_costmodel_imports(src) == {
        "gradsched.report.planted": ["gradsched.costmodel.formulas"]}
