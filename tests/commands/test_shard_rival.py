"""``gradsched shard rival`` on a SYNTHETIC trace (tests/experiments/test_sharded_rival.py's):
its options --compute, --comm, --world-size, --semantics, --plans-dir and --output each
change what it prints or writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.cli import main
from tests.experiments.test_sharded_rival import _trace

AB = "alpha-beta:alpha=1e-4,beta=1e-9"


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rival") / "synthetic.csv"
    _trace().save(path)
    return path


def _run(capsys, *args: str) -> str:
    assert main(["shard", "rival", *args]) == 0
    return capsys.readouterr().out


def test_the_options_change_the_table(trace_csv: Path, capsys, tmp_path: Path) -> None:
    base = ["--compute", str(trace_csv), "--comm", AB, "--world-size", "4"]
    plain = _run(capsys, *base)
    assert "fsdp-milp" in plain and "sharded-optimum" in plain
    assert _run(capsys, *base[:-1], "2") != plain  # --world-size
    assert _run(capsys, *base, "--semantics", "blocking") != plain  # --semantics
    assert _run(capsys, *base[:3], "alpha-beta:alpha=1e-2,beta=1e-9", *base[4:]) != plain  # --comm
    out = tmp_path / "r.csv"
    _run(capsys, *base, "--plans-dir", str(tmp_path / "plans"), "--output", str(out))
    frame = pd.read_csv(out)
    assert list(frame["cap"].unique()) == ["none", "fsdp2 peak"]
    assert (tmp_path / "plans" / "none" / "fsdp-milp.json").is_file()
    assert (tmp_path / "plans" / "fsdp2-peak" / "sharded-optimum.json").is_file()


def test_another_trace_is_another_table(trace_csv: Path, capsys, tmp_path: Path) -> None:
    frame = _trace().frame.copy()
    frame["forward_s"] *= 10
    from gradsched.traces import ComputeTrace
    from tests.replay.test_sharded import META

    other = tmp_path / "slow.csv"
    ComputeTrace.from_frame(frame, META).save(other)
    args = ["--comm", AB, "--world-size", "4"]
    assert _run(capsys, "--compute", str(other), *args) != _run(capsys, "--compute",
                                                                 str(trace_csv), *args)
