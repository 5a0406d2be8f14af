"""The package installed from its wheel runs without the source checkout.

Every data file gradsched reads (the configuration schemas in ``gradsched/schemas/``, the
overlap-slowdown model in ``gradsched/costmodel/``) is package data, read with
:mod:`importlib.resources`. Before, the schemas were read from the checkout's
``workflow/schemas/``, and an installed gradsched run elsewhere ended every command that
reads a topology, a reexec configuration or a scaling spec with "configuration schema not
found" (commit 181ccde).

The test builds the wheel from a copy of the sources (``pip wheel --no-deps
--no-build-isolation``: nothing is downloaded and the checkout gets no ``build/``), installs
it with pip into a fresh virtual environment in a temporary folder, whose only other
packages are the dependencies of the test's own environment (a ``.pth`` line, so nothing
large is installed), and runs each command that reads a schema there, from a working folder
outside the checkout, with no ``PYTHONPATH``. Inputs are copied from the checkout's
committed traces and configuration. About 20 s on two cores, so it runs in the normal suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO

TRACES = {
    "c": "traces/compute/cpu/resnet18-b4-cpu-fp32",
    "m": "traces/comm/cpu/gloo-tbf1gbit-p2",
    "intra8": "traces/comm/external/nccl-abci-intra-anode-8",
    "inter2": "traces/comm/external/nccl-abci-inter-anode-2",
    "inter4": "traces/comm/external/nccl-abci-inter-anode-4",
}
TOPOLOGY = "config/topologies/abci-a100-2x8-hierarchical.yaml"


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The ``gradsched`` script of a fresh environment holding the built wheel, and the
    environment to run it in."""
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copyfile(REPO / name, source / name)
    shutil.copytree(REPO / "src/gradsched", source / "src/gradsched",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "PIP_NO_INPUT": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "-q", "-w", str(root / "wheels"), str(source)], root, env)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "wheels").glob("gradsched-*.whl")
    venv = root / "venv"
    made = _run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], root, env)
    assert made.returncode == 0, made.stderr[-3000:]
    python = venv / "bin/python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                root, env).stdout.strip()
    # the test environment's dependencies, after the new environment's own packages (a
    # path line: the editable install's .pth files there are not processed)
    Path(site, "test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n",
                                                  encoding="utf-8")
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                 "--no-index", "-q", str(wheel)], root, env)
    assert done.returncode == 0, done.stderr[-3000:]
    where = _run([str(python), "-c", "import gradsched; print(gradsched.__file__)"], root, env)
    assert where.stdout.startswith(site), where.stdout + where.stderr
    return venv / "bin/gradsched", env


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder outside the checkout with copies of the inputs."""
    d = tmp_path_factory.mktemp("outside")
    assert not str(d).startswith(str(REPO))
    for name, stem in TRACES.items():
        for suffix in (".csv", ".meta.json"):
            shutil.copyfile(REPO / f"{stem}{suffix}", d / f"{name}{suffix}")
    shutil.copyfile(REPO / TOPOLOGY, d / "topo.yaml")
    topo = (d / "topo.yaml").read_text(encoding="utf-8")
    for name, stem in TRACES.items():  # its sweeps, named relative to the topology file
        topo = topo.replace(f"../../{stem}.csv", f"{name}.csv")
    assert "../" not in topo
    (d / "topo.yaml").write_text(topo, encoding="utf-8")
    shutil.copyfile(REPO / "config/reexec.yaml", d / "reexec.yaml")
    spec = (REPO / "config/published-scaling.yaml").read_text(encoding="utf-8")
    (d / "scaling.yaml").write_text(spec.replace("traces/", f"{REPO}/traces/"),
                                    encoding="utf-8")
    return d


COMMANDS = {
    "replay --topology": "replay --compute c.csv --topology topo.yaml --algorithms wfbp "
                         "--replay-iters 2 -o r.csv",
    "plan --topology": "plan --compute c.csv --topology topo.yaml --algorithm ddp -o p.json",
    "advise --topology": "advise --compute c.csv --topology topo.yaml --replay-iters 2",
    "study topology-replay": "study topology-replay --compute rn18 c.csv --topology two "
                             "topo.yaml hierarchical --algorithms wfbp --replay-iters 2 -o s.csv",
    "reexec run --list": "reexec run --config reexec.yaml --list",
    "study scaling-check": "study scaling-check --spec scaling.yaml -o sc.csv",
    "study topology-check": "study topology-check --intra intra8.csv --sweep inter2.csv "
                            "inter4.csv -o tc.csv",
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_installed_package_runs_outside_the_checkout(
        installed: tuple[Path, dict[str, str]], work: Path, name: str) -> None:
    script, env = installed
    done = _run([str(script), *COMMANDS[name].split()], work, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "schema" not in done.stderr, done.stderr


def test_every_data_file_of_the_package_is_package_data() -> None:
    """Each file of ``src/gradsched`` other than Python sources is matched by the
    package-data patterns of ``pyproject.toml`` (a new data file left out fails here)."""
    import fnmatch
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["gradsched"]
    package = REPO / "src/gradsched"
    for path in package.rglob("*"):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".py":
            continue
        rel = os.fspath(path.relative_to(package))
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} is not package data"
