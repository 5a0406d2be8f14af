"""``best`` against PyTorch DDP and against the executor running DDP's plan, with bootstrap
intervals: a case counts as faster only where its interval lies above 1.

Inputs are SYNTHETIC iterations made here (never committed as measurements)."""

from __future__ import annotations

from pathlib import Path

from gradsched.cli import main
from gradsched.reexec.best_versus import best_versus_table
from gradsched.report import latex, stock_ddp
from tests.reexec.test_best_versus import synthetic_reexec


def test_versus_macros_count_cases_by_their_interval() -> None:
    measured, iterations = synthetic_reexec()
    values = stock_ddp.reexec_versus_macros(best_versus_table(measured, iterations))
    assert values["ReexecBestVsExecDdpFasterCases"] == "1"
    assert values["ReexecBestVsDefaultFasterCases"] == "0"  # within the noise: not "beats"
    assert values["ReexecBestVsDefaultSlowerCases"] == "0"
    assert values["ReexecExecDdpOverDefaultSlowerCases"] == "1"
    assert values["ReexecBestVsDefaultList"].startswith("resnet18 b4 P=2 1 Gbit/s: 1.00 [")


def test_versus_macros_without_iterations_are_na(tmp_path: Path) -> None:
    measured, iterations = synthetic_reexec()
    without = stock_ddp.reexec_versus_macros(best_versus_table(measured, None))
    assert without["ReexecBestVsExecDdpMin"] == "n/a"
    mpath, ipath, out = tmp_path / "m.csv", tmp_path / "i.csv", tmp_path / "m.tex"
    measured.to_csv(mpath, index=False)
    iterations.to_csv(ipath, index=False)
    assert main(["report", "macros", "--reexec", str(mpath), "--reexec-iterations", str(ipath),
                 "-o", str(out)]) == 0
    values = latex.parse_macros(out.read_text())
    table = best_versus_table(measured, iterations).set_index("versus")
    assert values["ReexecBestVsExecDdpMin"] == f"{table.at['ExecDdp', 'ratio']:.2f}"
