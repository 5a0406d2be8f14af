"""The pre-launch gate (the "launch" family): a multi-process command refuses a plan that
does not fit the model, or a torchrun environment that cannot work, before any rank starts
(:mod:`gradsched.runtime.prelaunch`). Each case: exit 2, one ``error:`` line naming the
plan file or the variable, no traceback, no C++ frame, no rank started. Plans here are
SYNTHETIC (written below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.robustness.refusal import one_line

FORMAT = {"format": "gradsched.sharded_plan", "format_version": 1, "algorithm": "synthetic"}


def _sharded(path: Path, units: list[list[str]]) -> Path:
    path.write_text(json.dumps({**FORMAT, "units": [{"tensors": t} for t in units]}),
                    encoding="utf-8")
    return path


SHARD = ["shard", "run", "--model", "tiny-mlp", "--batch-size", "2", "--world-size", "2"]


def test_sharded_plan_naming_a_path_is_refused_before_launch(
        tmp_path: Path, no_ranks: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    plan = _sharded(tmp_path / "shadow.json", [["../../../etc/shadow"]])
    line = one_line([*SHARD, "--plan", str(plan)], capsys)
    assert "shadow.json" in line and "../../../etc/shadow" in line
    assert no_ranks == []


def test_another_models_sharded_plan_is_refused_before_launch(
        tmp_path: Path, no_ranks: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from gradsched.runtime.coverage import model_parameters

    names = list(model_parameters("resnet18", 1, None))
    blocks: dict[str, list[str]] = {}
    for name in names:
        blocks.setdefault(name.split(".")[0], []).append(name)
    plan = _sharded(tmp_path / "resnet18.json", list(blocks.values()))
    line = one_line([*SHARD, "--plan", str(plan)], capsys)
    assert "resnet18.json" in line and "tiny-mlp" in line
    assert no_ranks == []


def test_sharded_unit_splitting_a_module_is_refused_before_launch(
        tmp_path: Path, no_ranks: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from gradsched.runtime.coverage import model_parameters

    names = list(model_parameters("tiny-mlp", 2, None))
    weight = next(n for n in names if n.endswith(".weight") and "." in n)
    plan = _sharded(tmp_path / "split.json", [[weight]])  # its module's bias elsewhere
    line = one_line([*SHARD, "--plan", str(plan)], capsys)
    assert "split.json" in line and "whole modules" in line
    assert no_ranks == []


GOOD_ENV = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
BAD_ENVS = [
    ({"RANK": "abc"}, "$RANK"),
    ({"MASTER_PORT": "99999"}, "$MASTER_PORT"),
    ({"MASTER_PORT": "http"}, "$MASTER_PORT"),
    ({"RANK": "5"}, "$RANK"),
    ({"RANK": "-1"}, "$RANK"),
    ({"MASTER_ADDR": ""}, "$MASTER_ADDR"),
    ({"MASTER_ADDR": "no-such-host.invalid"}, "$MASTER_ADDR"),
    ({"WORLD_SIZE": "0"}, "$WORLD_SIZE"),
    ({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "1"}, "$LOCAL_RANK"),
]
RUN = ["run", "--torchrun", "--baseline", "ddp", "--model", "tiny-mlp", "--batch-size", "2",
       "--world-size", "2"]


@pytest.mark.parametrize("bad,variable", BAD_ENVS,
                         ids=[",".join(f"{k}={v}" for k, v in b.items()) for b, _ in BAD_ENVS])
def test_torchrun_environment_is_checked_before_init(
        bad: dict[str, str], variable: str, tmp_path: Path, no_ranks: list[str],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in {**GOOD_ENV, **bad}.items():
        monkeypatch.setenv(key, value)
    started = time.monotonic()
    line = one_line([*RUN, "-o", str(tmp_path / "x.csv")], capsys)
    assert time.monotonic() - started < 10
    assert variable in line
    assert no_ranks == []
    assert not (tmp_path / "x.csv").exists()


def test_unresolvable_master_is_refused_within_seconds(tmp_path: Path) -> None:
    """End to end, in a fresh process: one line naming $MASTER_ADDR, exit 2 (the gate's
    refusal, not a rendezvous that timed out). The subprocess bound catches a hang; no
    wall-clock assertion (the suite's load decides how long start-up takes)."""
    env = {**os.environ, **GOOD_ENV, "MASTER_ADDR": "no-such-host.invalid",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run([sys.executable, "-m", "gradsched", *RUN, "-o",
                           str(tmp_path / "x.csv")], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "$MASTER_ADDR" in done.stderr


def test_gate_accepts_a_good_environment() -> None:
    from gradsched.runtime.prelaunch import check_torchrun_env

    env = check_torchrun_env(GOOD_ENV)
    assert (env.rank, env.world_size, env.master_port) == (0, 2, 29511)
