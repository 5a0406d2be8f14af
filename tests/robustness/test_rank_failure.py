"""A rank that fails after the launch ends the command with one line (the "launch" family):
the rank, its exit status and its error, exit status 2, no Python traceback, no C++ frame,
no process or temporary file left (:func:`gradsched.distributed.launch`).

The failing model is SYNTHETIC: a user model (``failing_model:build``, written below) whose
forward raises on rank 1 only, so that it passes the pre-launch gate (built on the meta
device, no process group there) and fails inside a real gloo launch of 2 ranks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradsched.distributed import DistributedError, LaunchSpec, launch
from tests.robustness.test_faults import _live_pids_naming, _wait_for, needs_proc

pytest.importorskip("torch")

SRC = str(Path(__file__).resolve().parents[2] / "src")

FAILING_MODEL = '''
import torch
import torch.distributed as dist


class Failing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        if dist.is_available() and dist.is_initialized() and dist.get_rank() == 1:
            raise RuntimeError("synthetic failure in rank 1's forward\\nsecond line")
        return self.linear(x)


def build(batch_size, seq_len=None):
    def batch():
        return torch.randn(batch_size, 8), torch.randint(0, 4, (batch_size,))
    return Failing(), batch
'''


def _assert_one_line(err: str) -> str:
    assert "Traceback" not in err and "frame #" not in err and "c10::" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@needs_proc
def test_a_rank_that_raises_ends_the_command_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "failing_model.py").write_text(FAILING_MODEL, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(tmp_path / "models")]),
           "TMPDIR": str(tmp_path / "tmp")}
    env.pop("GRADSCHED_TRACEBACK", None)
    out = tmp_path / "out" / "x.csv"
    done = subprocess.run(
        [sys.executable, "-m", "gradsched", "run", "--baseline", "ddp", "--model",
         "failing_model:build", "--batch-size", "2", "--world-size", "2", "--iters", "2",
         "--warmup", "1", "--timeout-s", "60", "-o", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode in (1, 2), done.stderr
    line = _assert_one_line(done.stderr)
    assert line.startswith("gradsched run: error: rank 1 of 2 exited with code"), line
    assert "RuntimeError: synthetic failure in rank 1's forward" in line
    assert "second line" not in line
    assert not out.exists()
    _wait_for(lambda: not _live_pids_naming(str(tmp_path)), 15.0, "a rank was left running")
    assert list((tmp_path / "tmp").glob("gradsched-launch-*")) == []  # the launcher's folder


def test_a_rank_that_dies_is_named_in_one_line() -> None:
    """A rank that exits without a word (``os._exit(17)``): its status, on one line."""
    with pytest.raises(DistributedError) as info:
        launch("gradsched.distributed.tasks:die_on_rank", {"victim": 1},
               LaunchSpec(2, op_timeout_s=20, deadline_s=60))
    message = str(info.value)
    assert message.startswith("rank 1 of 2 exited with code 17"), message
    assert "\n" not in message


def test_the_ranks_output_follows_with_gradsched_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADSCHED_TRACEBACK", "1")
    with pytest.raises(DistributedError, match=r"(?s)^rank 0 of 1 .*no_such_task.*\n--- rank 0 "
                       r"output \(end\) ---\n.*Traceback"):
        launch("gradsched.distributed.tasks:no_such_task", {}, LaunchSpec(1, deadline_s=60))
