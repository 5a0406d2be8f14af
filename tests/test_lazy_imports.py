"""A command that neither fits a curve nor draws loads none of scipy's fitting, statistics,
integration or special-function packages, nor the plotting stack: each is imported where it
is used (``scipy.optimize`` inside the fitting functions, ``scipy.integrate``/``special``
inside the straggler model, matplotlib/seaborn by the figure writers), so ``replay``,
``plan`` and ``advise`` on a measured trace pay only for what they run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMPUTE = ROOT / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"
COMM = ROOT / "traces/comm/cpu/gloo-loopback-p2.csv"
HEAVY = ("scipy.stats", "scipy.optimize", "scipy.integrate", "scipy.special",
         "scipy.interpolate", "seaborn", "matplotlib")

# runs the command line as `python -m gradsched` does, then lists what it loaded
_PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['gradsched', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('gradsched', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
    "print('EXIT', code, 'LOADED', heavy, file=sys.stderr)\n"
)


def _loaded(argv: list[str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True,
                          text=True, timeout=300, cwd=cwd)
    return proc.stderr[-3000:]


@pytest.mark.parametrize("argv", [
    ["replay", "--help"],
    ["replay", "--compute", str(COMPUTE), "--comm", str(COMM), "-o", "replay.csv"],
    ["plan", "--compute", str(COMPUTE), "--comm", str(COMM), "--algorithm", "mgwfbp",
     "-o", "plan.json"],
    ["advise", "--compute", str(COMPUTE), "--comm", str(COMM)],
], ids=["replay-help", "replay", "plan", "advise"])
def test_command_loads_no_fitting_statistics_or_plotting(argv: list[str],
                                                         tmp_path: Path) -> None:
    err = _loaded(argv, tmp_path)
    assert "EXIT 0 LOADED []" in err, err


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    """The probe can fail: a command that fits (``fit`` on a comm trace) loads scipy.optimize."""
    err = _loaded(["fit", str(COMM), "--model", "alpha-beta", "-o", "fit.json"], tmp_path)
    assert "scipy.optimize" in err, err


def test_the_table_writer_loads_no_plotting_stack() -> None:
    """``report.tables`` imports a study's module only when its table is built: importing
    it (``report table --help``, or a table of a study that draws nothing) loads no
    matplotlib or seaborn."""
    code = ("import sys\nimport gradsched.report.tables as t\nimport gradsched.commands.report\n"
            "t.table_builder('compare'); t.table_builder('topology')\n"
            "print('LOADED', sorted(m for m in sys.modules if m.startswith(('matplotlib', "
            "'seaborn'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert "LOADED []" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_the_fit_tables_load_no_plotting_stack() -> None:
    """The fit and cross-world-size tables read ``report.fits``; its two figures, which load
    matplotlib and seaborn, are ``report.fits_figures`` (``report table fits`` paid about
    1 CPU-s for them)."""
    code = ("import sys\nimport gradsched.report.tables as t\n"
            "t.table_builder('fits'); t.table_builder('crossws')\n"
            "print('LOADED', sorted(m for m in sys.modules if m.startswith(('matplotlib', "
            "'seaborn', 'scipy.stats'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert "LOADED []" in proc.stdout, proc.stdout + proc.stderr[-2000:]
