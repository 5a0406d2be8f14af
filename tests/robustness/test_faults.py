"""Fault tests: a killed rank, a launcher that gets SIGTERM or SIGKILL,
an interrupted or killed ``gradsched cluster``, and two clusters side by side with
overlapping prefixes. Each must leave no process, namespace, record or temporary file
behind, and a cluster must never touch what it did not create.

The launcher runs in a child process with its own ``TMPDIR`` (under ``tmp_path``), so
"no temp file left" and "no process left" (processes whose command line names
``tmp_path``) are checked for this test alone, never for other work on the machine. The
tasks are synthetic (``gradsched.distributed.tasks:block_after_ready``: the ranks block
until someone kills them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gradsched.distributed import cluster as cl
from gradsched.distributed import cluster_record, netns
from tests.netns_support import needs_netns

REPO_SRC = str(Path(cl.__file__).resolve().parents[2])
START_S = 120.0  # generous: torch imports slowly on a loaded 2-core machine
ORPHAN_BOUND_S = 30.0  # ranks of a SIGKILLed launcher must exit within 30 s


needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(),
                                reason="needs /proc (Linux) to find processes left behind")


# ----------------------------------------------------------------------------- helpers


def _live_pids_naming(marker: str) -> list[int]:
    """Processes (not zombies) whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_for(check, timeout_s: float, what: str, step_s: float = 0.1):
    """Poll ``check()`` until it returns something truthy; fail naming ``what``."""
    end = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"{what} (waited {timeout_s:g} s)")
        time.sleep(step_s)


def _env(tmp_path: Path) -> dict[str, str]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return dict(os.environ, PYTHONPATH=REPO_SRC, TMPDIR=str(tmpdir),
                GRADSCHED_RUN_DIR=str(tmp_path / "run"))


_CHILDREN: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _stop_children():
    """A failing test must not leave its child running (SIGTERM lets it clean up)."""
    yield
    while _CHILDREN:
        child = _CHILDREN.pop()
        if child.poll() is None:
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.communicate(timeout=30)


_LAUNCHER = """
import sys
from gradsched.distributed import LaunchSpec, launch
launch("gradsched.distributed.tasks:block_after_ready",
       {"ready_dir": sys.argv[1], "sleep_s": 300},
       LaunchSpec(2, init_timeout_s=120, op_timeout_s=300, deadline_s=600))
"""


def _start_launcher(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    """A launcher of 2 blocking ranks in a child process; return it and the ranks' pids
    once both ranks are inside their task."""
    ready = tmp_path / "ready"
    ready.mkdir()
    child = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(ready)], env=_env(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _CHILDREN.append(child)

    def both_ready() -> list[int] | None:
        if child.poll() is not None:
            pytest.fail(f"launcher exited early ({child.returncode}): {child.stderr.read()}")
        files = sorted(ready.glob("rank*.ready"))
        return [int(f.read_text()) for f in files] if len(files) == 2 else None

    return child, _wait_for(both_ready, START_S, "the ranks never became ready")


def _assert_nothing_left(tmp_path: Path, within_s: float) -> float:
    """Wait until no process names ``tmp_path`` and the launcher's temp dir is gone;
    return how long that took."""
    start = time.monotonic()
    _wait_for(lambda: not _live_pids_naming(str(tmp_path)), within_s,
              f"processes left running: {_live_pids_naming(str(tmp_path))}")
    _wait_for(lambda: not list((tmp_path / "tmp").iterdir()), 5.0,
              f"temporary files left: {list((tmp_path / 'tmp').iterdir())}")
    return time.monotonic() - start


# ----------------------------------------------------------------------------- launcher


@needs_proc
@pytest.mark.slow
def test_killed_rank_stops_the_run_and_cleans_up(tmp_path):
    pytest.importorskip("torch")
    child, ranks = _start_launcher(tmp_path)
    os.kill(ranks[1], signal.SIGKILL)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert "exited with code -9" in err and "DistributedError" in err
    _assert_nothing_left(tmp_path, 10.0)


@needs_proc
@pytest.mark.slow
def test_launcher_sigterm_stops_ranks_and_removes_temp_dir(tmp_path):
    pytest.importorskip("torch")
    child, _ = _start_launcher(tmp_path)
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM
    _assert_nothing_left(tmp_path, 10.0)


@needs_proc
@pytest.mark.slow
def test_launcher_sigkill_ranks_exit_within_bound(tmp_path):
    """Rank 0 blocks in Python, rank 1 inside a C++ all-reduce: both must notice."""
    pytest.importorskip("torch")
    child, ranks = _start_launcher(tmp_path)
    assert sorted(_live_pids_naming(str(tmp_path))) == sorted([child.pid, *ranks])
    child.kill()
    child.communicate(timeout=30)
    took = _assert_nothing_left(tmp_path, ORPHAN_BOUND_S)
    print(f"ranks and temp dir gone {took:.2f} s after the launcher's SIGKILL")
    assert took < ORPHAN_BOUND_S


def test_orphan_guard_refuses_an_orphan(tmp_path):
    """``orphan_guard --parent-pid P`` exits at once when P is not its parent (gone)."""
    from gradsched.distributed.orphan_guard import ORPHANED_EXIT, main

    marker = tmp_path / "ran"
    cmd = [sys.executable, "-m", "gradsched.distributed.orphan_guard", "--parent-pid",
           str(os.getpid() + 1), "--", "touch", str(marker)]
    done = subprocess.run(cmd, env=_env(tmp_path), capture_output=True, timeout=60)
    assert done.returncode == ORPHANED_EXIT and not marker.exists()
    cmd[4] = str(os.getpid())
    assert subprocess.run(cmd, env=_env(tmp_path), timeout=60).returncode == 0
    assert marker.exists()
    assert main(["--bad"]) == 2


# ----------------------------------------------------------------------------- clusters


def _gradsched(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-m", "gradsched", *args], env=_env(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _CHILDREN.append(child)
    return child


def _ranks(marker: str, child: subprocess.Popen[str]) -> list[int]:
    """The rank processes of a ``gradsched cluster`` child: they name ``marker``."""
    return [pid for pid in _live_pids_naming(marker) if pid != child.pid]


def _existing(names: list[str]) -> list[str]:
    return sorted(set(names) & set(netns.list_namespaces()))


def _record(tmp_path: Path, prefix: str) -> Path:
    return tmp_path / "run" / "clusters" / f"{prefix}.json"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _prefix(tag: str) -> str:
    return f"gf{os.getpid() % 100000}{tag}-"


def _cli_prefix(child: subprocess.Popen[str]) -> str:
    """The prefix a ``gradsched cluster`` child names its namespaces with: its default,
    ``gs<its pid>-`` (:class:`gradsched.distributed.cluster.EmulatedCluster`)."""
    return f"gs{child.pid}-"


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """Records of in-process clusters go under ``tmp_path`` too."""
    monkeypatch.setenv("GRADSCHED_RUN_DIR", str(tmp_path / "run"))
    return tmp_path / "run" / "clusters"


@needs_netns
@pytest.mark.network
def test_cluster_interrupted_during_setup_leaves_nothing(tmp_path, run_dir):
    sleep = f"600.{os.getpid() % 997}1"  # a command line unique to this test
    child = _gradsched(tmp_path, "cluster", "--world-size", "8", "--rate", "100mbit",
                       "--", "sleep", sleep)
    prefix = _cli_prefix(child)
    names = cl.ClusterLayout(8, prefix).namespaces
    record = _record(tmp_path, prefix)

    def building() -> bool:
        rec = _read(record)
        return bool(rec) and any(e["inode"] for e in rec["namespaces"].values())

    _wait_for(building, 30.0, "the cluster never started building", step_s=0.01)
    child.send_signal(signal.SIGTERM)
    rec = _read(record) or {"namespaces": {}}
    built = sum(1 for e in rec["namespaces"].values() if e["inode"])
    print(f"SIGTERM after {built} of {len(names)} namespaces were created")
    assert built < len(names), "the build finished before the signal: nothing interrupted"
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert _existing(names) == []
    assert not record.exists()
    _wait_for(lambda: not _live_pids_naming(sleep), 10.0, "ranks left running")


@needs_netns
@pytest.mark.network
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 128 + signal.SIGTERM),
                                           (signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"])
def test_cluster_signal_while_running_stops_ranks(tmp_path, run_dir, sig, code):
    sleep = f"600.{os.getpid() % 997}2{int(sig)}"
    child = _gradsched(tmp_path, "cluster", "--world-size", "2", "--rate", "none",
                       "--", "sleep", sleep)
    prefix = _cli_prefix(child)
    names = cl.ClusterLayout(2, prefix).namespaces
    _wait_for(lambda: len(_ranks(sleep, child)) == 2, 60.0, "ranks never started")
    child.send_signal(sig)
    _, err = child.communicate(timeout=60)
    assert child.returncode == code, err
    assert _existing(names) == [] and not _record(tmp_path, prefix).exists()
    _wait_for(lambda: not _live_pids_naming(sleep), 10.0, "ranks left running")


@needs_netns
@pytest.mark.network
def test_cluster_sigkill_then_clean_by_record(tmp_path, run_dir, capsys):
    from gradsched.cli import main

    sleep = f"600.{os.getpid() % 997}3"
    child = _gradsched(tmp_path, "cluster", "--world-size", "2", "--rate", "none",
                       "--", "sleep", sleep)
    prefix = _cli_prefix(child)
    names = cl.ClusterLayout(2, prefix).namespaces
    record = _record(tmp_path, prefix)
    _wait_for(lambda: len(_ranks(sleep, child)) == 2
              and len((_read(record) or {}).get("processes", [])) == 2, 60.0,
              "ranks never started")
    child.kill()
    child.communicate(timeout=30)
    # The ranks get their parent-death signal; the namespaces and the record stay.
    _wait_for(lambda: not _live_pids_naming(sleep), ORPHAN_BOUND_S, "ranks outlived the kill")
    assert _existing(names) == sorted(names) and record.exists()
    # The next cluster says so, and leaves them alone.
    with cl.EmulatedCluster(1, None, prefix=_prefix("k2"), install_signal_handlers=False):
        pass
    err = capsys.readouterr().err
    assert "killed earlier left namespaces behind" in err and str(record) in err
    assert _existing(names) == sorted(names)
    # No arguments: a list, nothing removed; a name no record lists: refused.
    assert main(["cluster", "clean"]) == 2
    assert f"{record}: left by pid {child.pid}" in capsys.readouterr().out
    assert main(["cluster", "clean", f"{prefix}zz"]) == 2
    assert "did not create it" in capsys.readouterr().err
    assert _existing(names) == sorted(names)
    assert main(["cluster", "clean", str(record)]) == 0
    assert _existing(names) == [] and not record.exists()


@needs_netns
@pytest.mark.network
def test_two_clusters_with_overlapping_prefixes(tmp_path, run_dir):
    """``P-`` and ``P-r1`` (whose names all start with ``P-`` and with ``P-r1``, cluster
    A's rank-1 name): tearing either down leaves the other intact."""
    a_prefix = _prefix("o")
    b_prefix = f"{a_prefix}r1"
    a = cl.EmulatedCluster(2, None, prefix=a_prefix, install_signal_handlers=False)
    b = cl.EmulatedCluster(2, None, prefix=b_prefix, install_signal_handlers=False)
    foreign = f"{a_prefix}x"  # somebody else's namespace sharing the prefix
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        a.open()
        b.open()
        b_inodes = {n: netns.namespace_inode(n) for n in b.layout.namespaces}
        sleeper = subprocess.Popen([*b.prefix_for(1), "sleep", "600"])
        b.record_process(sleeper.pid)
        # The same prefix again: refused, A untouched.
        with pytest.raises(cl.ClusterError, match="in use by a running cluster"):
            cl.EmulatedCluster(2, None, prefix=a_prefix, install_signal_handlers=False).open()
        # A name of a live cluster cannot be cleaned.
        with pytest.raises(cl.ClusterError, match="running cluster"):
            cluster_record.clean_names([b.layout.switch])
        a.close()
        assert _existing(a.layout.namespaces) == []
        assert {n: netns.namespace_inode(n) for n in b.layout.namespaces} == b_inodes
        assert sleeper.poll() is None and foreign in netns.list_namespaces()
        assert cluster_record.record_path(b_prefix).exists()
        assert not cluster_record.record_path(a_prefix).exists()
        b.close()
        assert sleeper.wait(timeout=10) is not None
        assert _existing(b.layout.namespaces) == []
        assert not cluster_record.record_path(b_prefix).exists()
        assert foreign in netns.list_namespaces()
    finally:
        a.close()
        b.close()
        subprocess.run(["ip", "netns", "del", foreign], check=False)


@needs_netns
@pytest.mark.network
def test_existing_namespace_is_refused_not_reused(tmp_path, run_dir):
    prefix = _prefix("e")
    taken = f"{prefix}r1"
    subprocess.run(["ip", "netns", "add", taken], check=True)
    try:
        inode = netns.namespace_inode(taken)
        with pytest.raises(cl.ClusterError, match=f"{taken} exist already"):
            cl.EmulatedCluster(2, None, prefix=prefix, install_signal_handlers=False).open()
        assert netns.namespace_inode(taken) == inode  # untouched
        assert _existing(cl.ClusterLayout(2, prefix).namespaces) == [taken]
        assert not cluster_record.record_path(prefix).exists()
    finally:
        subprocess.run(["ip", "netns", "del", taken], check=False)
