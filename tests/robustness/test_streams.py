"""Outputs are committed only after what the command printed was delivered, and a standard
stream that is closed or fails ends the command with one line and exit status 2
(``gradsched.streams``).

On commit 181ccde ``replay -o r.csv`` with its standard output on ``/dev/full`` or a closed
pipe exited 2 after ``r.csv`` had been replaced; with standard output closed it ended
"internal error: AttributeError: 'NoneType' object has no attribute 'write'"; with
standard error closed a bad input exited 1. Each case runs the command in a child process
(the streams are file descriptors) on committed traces.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gradsched
from tests.conftest import REPO

SRC = str(Path(gradsched.__file__).resolve().parents[1])
"""The sources this test process imports: the child runs the same code."""

REPLAY = ["replay", "--compute", str(REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"),
          "--comm", str(REPO / "traces/comm/cpu/gloo-tbf1gbit-p2.csv"),
          "--algorithms", "wfbp,ddp", "--replay-iters", "2", "-o", "r.csv"]
OLD = "the previous results\n"


def _gradsched(cwd: Path, argv: list[str], **streams: object) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "gradsched", *argv], cwd=cwd, env=env,
                          timeout=300, check=False, **streams)


def _one_error(stderr: bytes) -> str:
    lines = [line for line in stderr.decode().splitlines() if "warning:" not in line]
    assert len(lines) == 1 and "error:" in lines[0], stderr.decode()
    assert "Traceback" not in lines[0] and "internal error" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("how", ["/dev/full", "closed pipe", "closed"])
def test_a_failing_stdout_leaves_the_output_as_it_was(tmp_path: Path, how: str) -> None:
    (tmp_path / "r.csv").write_text(OLD, encoding="utf-8")
    if how == "/dev/full":
        with open("/dev/full", "wb") as full:
            done = _gradsched(tmp_path, REPLAY, stdout=full, stderr=subprocess.PIPE)
    elif how == "closed pipe":
        read, write = os.pipe()
        os.close(read)  # nobody reads: the first write gets EPIPE
        try:
            done = _gradsched(tmp_path, REPLAY, stdout=write, stderr=subprocess.PIPE)
        finally:
            os.close(write)
    else:
        done = _gradsched(tmp_path, ["replay", *REPLAY[1:]], stderr=subprocess.PIPE,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 2, done.stderr.decode()
    line = _one_error(done.stderr)
    assert "standard output" in line, line
    assert (tmp_path / "r.csv").read_text(encoding="utf-8") == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]  # no stand-ins left


def test_plan_is_not_written_when_stdout_fails(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(OLD, encoding="utf-8")
    argv = ["plan", *REPLAY[1:5], "--algorithm", "ddp", "-o", "p.json"]
    with open("/dev/full", "wb") as full:
        done = _gradsched(tmp_path, argv, stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == 2 and "standard output" in _one_error(done.stderr)
    assert (tmp_path / "p.json").read_text(encoding="utf-8") == OLD


def test_a_bad_input_with_stderr_closed_exits_2(tmp_path: Path) -> None:
    argv = [*REPLAY[:2], str(tmp_path / "missing.csv"), *REPLAY[3:]]
    done = _gradsched(tmp_path, argv, stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2))
    assert done.returncode == 2
    assert not (tmp_path / "r.csv").exists()


def test_the_output_is_written_when_stdout_takes_it(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text(OLD, encoding="utf-8")
    done = _gradsched(tmp_path, REPLAY, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr.decode()
    assert b"fastest:" in done.stdout
    assert (tmp_path / "r.csv").read_text(encoding="utf-8").startswith("algorithm,")
