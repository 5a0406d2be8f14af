"""Ctrl-C during the start-up of a multi-rank command (family "signals").

SIGINT at any moment of ``gradsched run`` (while the command modules load, while the
launcher starts its ranks, while they run) must end with exit status 130, one line on
stderr and no traceback, and leave no rank behind: every process that inherited the
test's marker variable is looked up in ``/proc`` afterwards. All runs are SYNTHETIC
(tiny-mlp, random weights, loopback).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gradsched import cli

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(),
                                reason="needs Linux /proc to find the ranks")

RUN = ["run", "--baseline", "ddp", "--model", "tiny-mlp", "--batch-size", "2",
       "--world-size", "2", "--iters", "200"]


def _marked(mark: str) -> list[int]:
    """Pids of the processes whose environment holds ``mark`` (the command and its ranks)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if mark.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _ranks(mark: str) -> list[int]:
    """The marked processes that are ranks (``gradsched.distributed.worker``)."""
    out = []
    for pid in _marked(mark):
        try:
            if b"gradsched.distributed.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            continue
    return out


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    mark = uuid.uuid4().hex
    env = {**os.environ, "GRADSCHED_TEST_MARK": mark, "PYTHONUNBUFFERED": "1"}
    env.pop("GRADSCHED_TRACEBACK", None)
    proc = subprocess.Popen([sys.executable, "-m", "gradsched", *RUN, "-o",
                             str(tmp_path / "r.csv")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, mark


def _interrupt_and_check(proc: subprocess.Popen[str], mark: str, tmp_path: Path) -> None:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, f"exit {proc.returncode}: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].endswith("interrupted"), lines[0]
    deadline = time.monotonic() + 10  # a rank watching its lifeline exits within 1 s
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked(mark) == [], "a rank outlived the interrupted command"
    assert not (tmp_path / "r.csv").exists()


def _wait_for_library(proc: subprocess.Popen[str], library: str) -> None:
    """Until ``library``'s shared objects are mapped into ``proc``: Python is then past its
    own start-up and inside gradsched's imports (a signal during the interpreter's start-up
    is Python's, not gradsched's, to report)."""
    deadline = time.monotonic() + 60
    while library not in Path(f"/proc/{proc.pid}/maps").read_text(errors="replace"):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{library} not loaded within 60 s"
        time.sleep(0.001)


@pytest.mark.parametrize("library", ["numpy", "pandas", "scipy"])
def test_sigint_while_the_command_loads(tmp_path: Path, library: str) -> None:
    """Ctrl-C while the command modules import numpy, pandas, scipy (numpy turns a Ctrl-C
    inside its C import into an ImportError; that too must read as interrupted)."""
    proc, mark = _start(tmp_path)
    _wait_for_library(proc, library)
    _interrupt_and_check(proc, mark, tmp_path)


def test_sigint_while_the_ranks_start(tmp_path: Path) -> None:
    """Ctrl-C as soon as the first rank process exists (the launcher is still starting
    the others, the ranks are still importing torch)."""
    proc, mark = _start(tmp_path)
    deadline = time.monotonic() + 60
    while not _ranks(mark):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no rank started within 60 s"
        time.sleep(0.005)
    _interrupt_and_check(proc, mark, tmp_path)


def test_sigint_before_the_parser_exists(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """In process: a KeyboardInterrupt raised while the parser is built (the command
    modules load) is the same one line and 130, not a traceback."""
    def interrupted(*_argv: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["run", "--help"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "gradsched: interrupted"


CASES = 5  # while_the_command_loads x 3, while_the_ranks_start, before_the_parser_exists
