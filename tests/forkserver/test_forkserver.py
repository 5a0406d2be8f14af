"""The warm server of :mod:`gradsched.forkserver`: a command runs there exactly as in a fresh
process (streams, status, outputs), or runs in the caller's process; signals reach it; no
process outlives its caller or the server's parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gradsched.forkserver import lifecycle
from gradsched.forkserver.protocol import SOCKET_VARIABLE

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SERVE_SLEEPER = ("import sys; sys.path.insert(0, sys.argv[2]); from sleeper import main; "
                 "from gradsched.forkserver.server import serve; serve(sys.argv[1], main)")


def _env(socket_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (SOCKET_VARIABLE, "PYTEST_CURRENT_TEST")}  # pytest changes the latter
    env.update({SOCKET_VARIABLE: str(socket_path), "PROBE": "x", **extra})
    return env


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def sleeper_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A server whose command is :func:`sleeper.main`, in the test's environment."""
    socket_path = tmp_path / "socket"
    proc = subprocess.Popen([sys.executable, "-P", "-c", SERVE_SLEEPER, str(socket_path),
                             str(HERE)], env=_env(socket_path), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready", proc.stderr.read() if proc.stderr else ""
    yield proc, socket_path
    proc.terminate()
    proc.wait(10)


def _client(argv: list[str], socket_path: Path, cwd: Path, **extra: str
            ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-P", "-m", "gradsched", *argv],
                            env=_env(socket_path, **extra), cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _ledger(socket_path: Path) -> list[str]:
    path = socket_path.parent / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_the_server_runs_the_command_with_the_callers_streams_cwd_and_status(
        sleeper_server, tmp_path: Path) -> None:
    _, socket_path = sleeper_server
    out, err = _client(["report", "3"], socket_path, tmp_path).communicate(timeout=60)
    proc = _client(["report", "0"], socket_path, tmp_path)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out.strip() == f"served ['report', '3'] in {tmp_path} PROBE=x"
    assert err.strip() == "to stderr"
    assert _ledger(socket_path) == ["served", "served"]


def test_another_environment_or_folder_runs_the_command_in_its_own_process(
        sleeper_server, tmp_path: Path) -> None:
    """Refused: the real CLI runs it (``--version`` prints the package's version, which the
    stand-in command would not)."""
    _, socket_path = sleeper_server
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd, extra in ((tmp_path, {"PROBE": "y"}), (elsewhere, {})):
        proc = _client(["--version"], socket_path, cwd, **extra)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out.startswith("gradsched "), out
    assert _ledger(socket_path) == ["refused: another environment (PROBE)",
                                    "refused: another working folder"]


def test_no_server_listening_runs_the_command_in_its_own_process(tmp_path: Path) -> None:
    proc = _client(["--version"], tmp_path / "no-socket", tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.startswith("gradsched "), err


def _sleeping(socket_path: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    pidfile = tmp_path / "pid"
    proc = _client(["sleep", str(pidfile)], socket_path, tmp_path)
    _wait_for(lambda: pidfile.exists() and pidfile.read_text())
    return proc, int(pidfile.read_text())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_to_the_caller_reach_the_command(sleeper_server, tmp_path: Path,
                                                 sig: int) -> None:
    _, socket_path = sleeper_server
    proc, pid = _sleeping(socket_path, tmp_path)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    expected = 1 if sig == signal.SIGINT else 128 + sig  # KeyboardInterrupt: the stand-in's
    assert proc.returncode == expected
    _wait_for(lambda: not psutil.pid_exists(pid) or
              psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)


def test_a_killed_caller_ends_its_command(sleeper_server, tmp_path: Path) -> None:
    server, socket_path = sleeper_server
    proc, pid = _sleeping(socket_path, tmp_path)
    proc.kill()
    proc.wait(10)
    _wait_for(lambda: pid not in {c.pid for c in psutil.Process(server.pid).children()})


def test_the_server_ends_with_its_parent_and_removes_its_socket(tmp_path: Path) -> None:
    """The parent (Snakemake) killed with SIGKILL: no server is left behind."""
    parent = subprocess.Popen(
        [sys.executable, "-P", "-c",
         "import sys, time; sys.path.insert(0, sys.argv[1]); "
         "from gradsched.forkserver import lifecycle; print(lifecycle.start(), flush=True); "
         "time.sleep(120)", str(REPO / "src")], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert "serving jobs at" in line, line
    socket_path = Path(line.rsplit(" ", 1)[1].strip())
    servers = psutil.Process(parent.pid).children()
    assert len(servers) == 1
    parent.kill()
    parent.wait(10)
    _wait_for(lambda: not servers[0].is_running() or
              servers[0].status() == psutil.STATUS_ZOMBIE)
    assert not socket_path.exists()
    assert not socket_path.parent.exists()


@pytest.mark.slow
def test_a_real_command_through_the_server_is_byte_identical(tmp_path: Path) -> None:
    """The package's server (every command module loaded), a real replay and a real error:
    the same outputs, streams and statuses as fresh processes in the same environment."""
    compute = "traces/compute/cpu/bert-base-s128-b2-cpu-fp32.csv"
    comm = "traces/comm/cpu/gloo-tbf1gbit-p2.csv"

    def run(name: str, env: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
        out = str(tmp_path / name)
        cmds = [["replay", "--compute", compute, "--comm", comm, "--algorithms",
                 "wfbp,mgwfbp,search", "-o", f"{out}.csv"],
                ["replay", "--compute", "missing.csv", "--comm", comm, "-o", f"{out}x.csv"]]
        return [subprocess.run([sys.executable, "-P", "-m", "gradsched", *argv], text=True,
                               capture_output=True, timeout=300, cwd=REPO, env=env)
                for argv in cmds]

    old_cwd = os.getcwd()
    os.chdir(REPO)  # the server's working folder is the caller's (Snakemake's)
    try:
        print(lifecycle.start())
        env = lifecycle.job_environment(os.environ[SOCKET_VARIABLE])
        served = run("served", env)
    finally:
        summary = lifecycle.stop()
        os.chdir(old_cwd)
    fresh = run("fresh", {k: v for k, v in env.items() if k != SOCKET_VARIABLE})
    assert summary == "gradsched forkserver: 2 commands served, 0 refused"
    assert (tmp_path / "fresh.csv").read_bytes() == (tmp_path / "served.csv").read_bytes()
    for a, b in zip(fresh, served, strict=True):
        assert (a.returncode, a.stderr) == (b.returncode, b.stderr.replace("served", "fresh"))
        assert a.stdout.replace("fresh", "served") == b.stdout
    assert fresh[1].returncode == 2 and fresh[1].stderr.count("\n") == 1
