"""What a killed or signalled run leaves behind (``docs/errors.md``, "Outputs").

SIGTERM, SIGHUP and SIGUSR1 unwind a command (``gradsched.cli`` runs it under
:func:`gradsched.distributed.lifeline.exit_on_signals`): its staging folders and temporary
files are removed, the previous outputs stay, and it exits with 128 + the signal. A run
killed by SIGKILL cannot clean up; its stand-ins carry its pid and start time, and the next
run that writes in the same folder removes them (and leaves a live run's alone). All
inputs are SYNTHETIC.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import gradsched.staging as staging_module
from gradsched import io as gio
from gradsched.cli import main
from gradsched.staging import Staging
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

WAIT_S = 60  # longest wait for a child to reach its pause or to exit


@pytest.fixture
def work(tmp_path: Path) -> Path:
    synthetic_compute_trace(8).save(tmp_path / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(tmp_path / "m.csv")
    return tmp_path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")
                  if p.name.endswith((".staging", ".tmp", ".kept")))


def _wait_for(path: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if child.poll() is not None:
            raise AssertionError(f"the child exited early: {child.communicate()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError("the child never reached its pause")
        time.sleep(0.05)


# A replay with three outputs that pauses inside its staging block, after the results
# were computed and the timeline and plan files written into the stand-ins.
_PAUSED_REPLAY = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    import gradsched.commands.replaycmd as replaycmd
    from gradsched.cli import main

    ready = Path(sys.argv[1])
    real = replaycmd.compare

    def compare(*args, **kwargs):
        frame = real(*args, **kwargs)
        ready.write_text("paused", encoding="utf-8")
        time.sleep(120)
        return frame

    replaycmd.compare = compare
    sys.exit(main(sys.argv[2:]))
    """)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1],
                         ids=["SIGTERM", "SIGHUP", "SIGUSR1"])
def test_a_signal_during_a_multi_output_command_leaves_nothing(sig: int, work: Path) -> None:
    out = work / "out"
    out.mkdir()
    (out / "r.csv").write_text("previous results\n", encoding="utf-8")
    ready = work / "ready"
    argv = ["replay", "--compute", str(work / "c.csv"), "--comm", str(work / "m.csv"),
            "--algorithms", "wfbp,ddp", "-o", str(out / "r.csv"),
            "--timeline", str(out / "timeline"), "--plans", str(out / "plans")]
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_REPLAY, str(ready), *argv],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(ready, child)
    assert _leftovers(out), "the stand-ins should exist while the command runs"
    child.send_signal(sig)
    _, err = child.communicate(timeout=WAIT_S)
    assert child.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["r.csv"]  # no timeline, plans, staging
    assert (out / "r.csv").read_text(encoding="utf-8") == "previous results\n"


_KILLED_WRITER = textwrap.dedent("""\
    import os, signal, sys
    from pathlib import Path
    from gradsched.io import atomic_open
    from gradsched.staging import Staging

    out = Path(sys.argv[1])
    stage = Staging()
    stage.file(out / "r.csv").write_text("half", encoding="utf-8")
    (stage.folder(out / "plans") / "a.json").write_text("{}", encoding="utf-8")
    with atomic_open(out / "single.json") as handle:
        handle.write("half")
        handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)


def test_a_sigkilled_runs_staging_is_removed_by_the_next_run(work: Path) -> None:
    out = work / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(out)],
                          capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    left = _leftovers(out)
    assert len(left) == 3, left  # two stand-in folders and one temporary file
    assert all(re.search(r"\.\d+-\d+\.", name) for name in left), left  # pid-start tags
    code = main(["plan", "--compute", str(work / "c.csv"), "--comm", str(work / "m.csv"),
                 "--algorithm", "wfbp", "-o", str(out / "wfbp.json")])
    assert code == 0
    assert _leftovers(out) == []
    assert sorted(p.name for p in out.iterdir()) == ["wfbp.json"]


_LIVE_WRITER = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from gradsched.staging import Staging

    out = Path(sys.argv[1])
    stage = Staging()
    stage.file(out / "r.csv").write_text("in progress", encoding="utf-8")
    (out / "ready").write_text("", encoding="utf-8")
    time.sleep(120)
    """)


def test_a_live_runs_staging_is_left_alone(work: Path) -> None:
    out = work / "out"
    out.mkdir()
    child = subprocess.Popen([sys.executable, "-c", _LIVE_WRITER, str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out / "ready", child)
        left = _leftovers(out)
        assert len(left) == 1 and f".{child.pid}-" in left[0], left
        assert gio.remove_leftovers(out) == []
        with Staging() as stage:
            gio.write_text_atomic(stage.file(out / "other.csv"), "x\n")
        assert _leftovers(out) == left  # the other process's stand-in survives
    finally:
        child.kill()
        child.communicate(timeout=WAIT_S)
    assert [p.name for p in gio.remove_leftovers(out)] == left  # now it is a dead one's


def test_a_reused_pid_is_not_taken_for_the_writer(work: Path) -> None:
    """A stand-in whose pid now belongs to another process (another start time) is a
    leftover: the name records the start time, not only the pid."""
    stale = work / f".r.csv.{os.getpid()}-1.abcdefgh.staging"
    stale.mkdir()
    (stale / "r.csv").write_text("stale", encoding="utf-8")
    mine = gio.temporary(work, "r.csv", suffix=".staging", directory=True)
    assert not stale.exists() and mine.exists()
    assert gio.process_tag() in mine.name


def test_signals_are_held_during_the_commit(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that arrives while the outputs move is delivered after the last move,
    so a commit is never cut in half."""
    seen: list[str] = []
    real = gio.move

    def move(source: object, dest: object) -> None:
        if not seen:
            os.kill(os.getpid(), signal.SIGUSR1)  # arrives during the commit
        seen.append(str(dest))
        real(source, dest)  # type: ignore[arg-type]

    def handler(signum: int, frame: object) -> None:
        seen.append("signal")

    monkeypatch.setattr(staging_module, "move", move)
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        with Staging() as stage:
            for name in ("a.csv", "b.csv"):
                gio.write_text_atomic(stage.file(tmp_path / name), name)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert seen[-1] == "signal" and len(seen) == 3, seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]
