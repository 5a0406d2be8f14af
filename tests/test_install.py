"""The install files: requirements.lock parses and is marked per platform, pyproject is complete.

The three-platform resolution against PyPI is tools/check_lock.py (network; results in
docs/install-check.md); these tests check the files themselves and that check's logic.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
import tomllib
from collections.abc import Mapping
from importlib.metadata import packages_distributions
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
CUDA_ONLY = re.compile(r"^(nvidia-.*|cuda-.*|triton)$")
# Import names that differ from their distribution's, for modules not installed here (a venv
# made with `make env TORCH=0` has no torch family); installed ones are looked up instead.
IMPORT_ALIASES = {"yaml": "pyyaml", "sklearn": "scikit-learn"}


def _check_lock() -> ModuleType:
    """tools/check_lock.py, imported from its path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("check_lock", ROOT / "tools" / "check_lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_lock", module)
    spec.loader.exec_module(module)
    return module


check_lock = _check_lock()
PLATFORMS = {p.name: p for p in check_lock.PLATFORMS}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pyproject_requirements() -> dict[str, list[Requirement]]:
    """pyproject's dependencies by group: "" for the base, else the extra's name.

    An extra that names the package itself (``all = ["gradsched[torch,...]"]``) is left out.
    """
    project = _pyproject()
    groups = {"": [Requirement(r) for r in project["dependencies"]]}
    for name, reqs in project.get("optional-dependencies", {}).items():
        groups[name] = [Requirement(r) for r in reqs if Requirement(r).name != project["name"]]
    return groups


def test_the_all_extra_names_every_other_extra() -> None:
    project = _pyproject()
    extras = project["optional-dependencies"]
    (everything,) = (Requirement(r) for r in extras["all"])
    assert everything.name == project["name"]
    assert everything.extras == set(extras) - {"all"}


def test_lock_parses_into_unique_exact_pins() -> None:
    pins = check_lock.read_lock(LOCK)
    names = [canonicalize_name(p.name) for p in pins]
    assert len(pins) > 100
    assert len(names) == len(set(names)), "a package is pinned twice"
    for pin in pins:
        (spec,) = pin.specifier
        Version(spec.version)  # a real version, no wildcard
        assert not pin.extras and pin.url is None


def test_read_lock_refuses_a_range(tmp_path: Path) -> None:
    lock = tmp_path / "bad.lock"
    lock.write_text("# synthetic lock\nnumpy==2.4.6\npandas>=2\n")
    with pytest.raises(SystemExit, match=r"bad.lock:3: not an exact pin"):
        check_lock.read_lock(lock)


def test_every_cuda_only_pin_is_for_linux_only() -> None:
    """nvidia-*, cuda-*, triton: marked, kept on both Linux targets, dropped on macOS."""
    pins = check_lock.read_lock(LOCK)
    cuda = [p for p in pins if CUDA_ONLY.match(canonicalize_name(p.name))]
    assert len(cuda) >= 15
    for pin in cuda:
        assert pin.marker is not None, f"{pin.name} has no platform marker"
    for name, linux in (("linux-x86_64", True), ("linux-aarch64", True), ("macos-arm64", False)):
        kept = check_lock.kept_pins(pins, PLATFORMS[name].environment("3.11"))
        assert all((canonicalize_name(p.name) in kept) is linux for p in cuda), name
        assert "torch" in kept and "torchvision" in kept, name


def _third_party_imports(package: Path) -> dict[str, set[str]]:
    """Top-level modules imported anywhere under ``package`` (lazy imports too), by file."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != package.name:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@functools.cache
def _installed() -> Mapping[str, list[str]]:
    return packages_distributions()


def _providers(module: str) -> set[str]:
    """Distributions that provide top-level ``module``: installed ones, else its known name."""
    installed = _installed().get(module, [])
    if installed:
        return {canonicalize_name(d) for d in installed}
    return {canonicalize_name(IMPORT_ALIASES.get(module, module))}


def test_pyproject_covers_every_import_of_the_package() -> None:
    """Each third-party import of src/gradsched is a dependency or an extra in pyproject."""
    imports = _third_party_imports(ROOT / "src" / "gradsched")
    assert {"numpy", "pandas", "torch"} <= set(imports)
    declared = {canonicalize_name(r.name) for g in _pyproject_requirements().values() for r in g}
    for module, files in imports.items():
        providers = _providers(module)
        assert providers & declared, f"{module} ({sorted(files)[0]}) is missing from pyproject"


def test_base_dependencies_cover_the_torch_free_modules() -> None:
    """`pip install .` (no extra) imports everything but the torch family (reexec, capture...)."""
    torch_family = {"torch", "torchvision", "transformers", "sklearn"}
    base = {canonicalize_name(r.name) for r in _pyproject_requirements()[""]}
    for module in set(_third_party_imports(ROOT / "src" / "gradsched")) - torch_family:
        assert _providers(module) & base, (
            f"{module} is needed without torch but is not a base dependency"
        )


def test_lock_pins_every_pyproject_dependency_within_its_range() -> None:
    pins = {canonicalize_name(p.name): p for p in check_lock.read_lock(LOCK)}
    for group, reqs in _pyproject_requirements().items():
        for req in reqs:
            pin = pins.get(canonicalize_name(req.name))
            assert pin is not None, f"pyproject [{group or 'base'}] {req} is not in the lock"
            (spec,) = pin.specifier
            assert req.specifier.contains(spec.version), f"{req} vs lock {spec.version}"


# Synthetic resolutions (made up for these tests) for the Requires-Dist walk of check_lock.
LINUX = PLATFORMS["linux-x86_64"].environment("3.11")
MACOS = PLATFORMS["macos-arm64"].environment("3.11")
SYNTHETIC = {
    "torch": (
        Version("2.0"),
        [
            'cuda-toolkit[cublas]==13.0; platform_system == "Linux"',
            "filelock",
            'optree>=1; extra == "optree"',
        ],
    ),
    "cuda-toolkit": (Version("13.0"), ['nvidia-cublas==13.*; extra == "cublas"']),
    "nvidia-cublas": (Version("13.1"), []),
    "filelock": (Version("3.0"), []),
}


def test_closure_walk_accepts_a_complete_resolution() -> None:
    roots = [Requirement("torch==2.0")]
    assert check_lock.unmet(SYNTHETIC, roots, LINUX) == []


def test_closure_walk_follows_extras_and_reports_a_missing_package() -> None:
    partial = {k: v for k, v in SYNTHETIC.items() if k != "nvidia-cublas"}
    (problem,) = check_lock.unmet(partial, [Requirement("torch==2.0")], LINUX)
    assert "cuda-toolkit needs nvidia-cublas==13.*" in problem


def test_closure_walk_evaluates_markers_for_the_target() -> None:
    """On macOS torch's Linux-only requirement does not apply, so no CUDA package is needed."""
    macos = {k: v for k, v in SYNTHETIC.items() if k in ("torch", "filelock")}
    assert check_lock.unmet(macos, [Requirement("torch==2.0")], MACOS) == []
    assert check_lock.unmet(macos, [Requirement("torch==2.0")], LINUX) != []


def test_closure_walk_reports_a_version_outside_the_range() -> None:
    problems = check_lock.unmet(SYNTHETIC, [Requirement("filelock>=3.1")], LINUX)
    assert problems == ["lock/pyproject needs filelock>=3.1: the lock has 3.0"]
