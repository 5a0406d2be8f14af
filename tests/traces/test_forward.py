"""Forward time as an explicit, labelled input (issue 14, item 4)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError
from gradsched.report.forward import forward_table
from gradsched.traces import ComputeTrace
from gradsched.traces.forward import DEFAULT_FORWARD_RATIO, forward_measured, with_forward

REPO = Path(__file__).resolve().parents[2]
BCAFFE = REPO / "traces/compute/bcaffe/googlenet-tmp8comm.csv"
BCAFFE_COMM = REPO / "traces/comm/external/bcaffe-googlenet-tmp8comm.csv"
CPU = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"


def test_bcaffe_forward_is_assumed_and_labelled() -> None:
    trace = ComputeTrace.load(BCAFFE)
    assert not forward_measured(trace)
    assumed = with_forward(trace, None)
    assert DEFAULT_FORWARD_RATIO == 0.5
    assert assumed.frame["forward_s"].sum() == pytest.approx(
        0.5 * trace.frame["backward_s"].sum())
    assert assumed.meta["forward_ratio"] == 0.5
    assert "not measured" in assumed.meta["forward_assumption"]
    assert with_forward(trace, 0.0).frame["forward_s"].sum() == 0.0
    assert (trace.frame["forward_s"] == 0).all()  # the loaded trace is not changed


def test_a_measured_forward_is_never_replaced() -> None:
    trace = ComputeTrace.load(CPU)
    assert forward_measured(trace)
    assert with_forward(trace, None) is trace
    with pytest.raises(ConfigError, match="was measured"):
        with_forward(trace, 0.5)


@pytest.mark.parametrize("ratio", ["nan", "-1", "inf", "11"])
def test_bad_ratio_is_a_clear_error(ratio: str, tmp_path: Path, capsys) -> None:
    argv = ["replay", "--compute", str(BCAFFE), "--comm", str(BCAFFE_COMM),
            "--algorithms", "wfbp", "--forward-ratio", ratio, "-o", str(tmp_path / "r.csv")]
    with pytest.raises(SystemExit) as exc:  # refused by argparse itself (exit 2)
        main(argv)
    assert exc.value.code == 2
    assert "--forward-ratio" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_forward_moves_the_ranking(tmp_path: Path) -> None:
    runs = []
    for ratio in ("0", "0.5"):
        out = tmp_path / f"r{ratio}.csv"
        assert main(["replay", "--compute", str(BCAFFE), "--comm", str(BCAFFE_COMM),
                     "--algorithms", "wfbp,mgwfbp,dear", "--forward-ratio", ratio,
                     "-o", str(out)]) == 0
        runs.append((float(ratio), out))
    zero, half = (pd.read_csv(p).set_index("algorithm")["iteration_s"] for _, p in runs)
    # every plan pays the added forward, DeAR's all-gathers hide under part of it
    assert (half > zero).all()
    assert half["dear"] - zero["dear"] < half["wfbp"] - zero["wfbp"]
    long = pd.concat([pd.read_csv(p).assign(forward_ratio=r) for r, p in runs])
    table = forward_table(long)
    assert list(table.columns)[1:] == ["fwd 0x bwd: ms (rank)", "fwd 0.5x bwd: ms (rank)"]


def test_claims_come_from_the_macros(tmp_path: Path) -> None:
    from gradsched.report.claims import render_claims, write_claims

    text = render_claims({"MgwfbpContigGapMaxPct": "5.2", "HeadlineFastest": "Search"})
    assert "at most\n   5.2 %" in text and "schedule is\n   Search" in text
    assert "n/a" in text  # a macro the pipeline could not compute is never a number
    macros = tmp_path / "macros.tex"
    macros.write_text("\\newcommand{\\gsCompareNumWithin}{20}\n", encoding="utf-8")
    write_claims(macros, tmp_path / "claims.md")
    assert "20 of n/a checks" in (tmp_path / "claims.md").read_text(encoding="utf-8")
    assert main(["report", "claims", "--macros", str(tmp_path / "missing.tex"), "-o",
                 str(tmp_path / "c.md")]) == 2


def test_outputs_are_readable_by_others(tmp_path: Path) -> None:
    """Atomic writes go through mkstemp (mode 0600); the renamed output has the mode a plain
    open() would give it (issue 17)."""
    import os
    import stat

    from gradsched.io import write_text_atomic

    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "out.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o644


def test_latex_log_problems_fail_the_build(tmp_path: Path, capsys) -> None:
    from gradsched.report.latexlog import problems

    log = ("LaTeX Warning: Float too large for page by 289.91199pt on input line 329.\n"
           "LaTeX Warning: Reference `fig:x' on page 3 undefined on input line 12.\n"
           "LaTeX Warning: There were undefined references.\n"
           "Overfull \\hbox (1.2pt too wide) in paragraph at lines 1--2\n")
    assert len(problems(log)) == 3
    assert problems("LaTeX Warning: Label(s) may have changed.\n") == []
    path = tmp_path / "main.log"
    path.write_text(log, encoding="utf-8")
    assert main(["report", "latex-check", str(path)]) == 2
    assert "Float too large" in capsys.readouterr().err
    path.write_text("clean\n", encoding="utf-8")
    assert main(["report", "latex-check", str(path)]) == 0
