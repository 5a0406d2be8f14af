"""The emulated cluster: namespaces, veth links, bridge and tbf qdiscs appear, are shaped,
and vanish on every exit path (normal, exception, crashed rank, SIGTERM, SIGKILL + clean)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from gradsched.distributed import cluster as cl
from gradsched.distributed import cluster_record
from gradsched.distributed.cluster import ClusterError, EmulatedCluster
from tests.netns_support import needs_netns, ours

REPO_SRC = str(cl.__file__).rsplit("/gradsched/", 1)[0]


network = pytest.mark.network


def _root_links() -> list[str]:
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True)
    return sorted(line.split()[0] for line in out.stdout.splitlines() if line.strip())


@pytest.fixture
def prefix(request):
    """A test-unique namespace prefix; anything left behind fails the test (and is removed)."""
    yield from _checked(f"gst{os.getpid()}{request.node.name[-6:].replace('_', '')}-")


@pytest.fixture
def cli_prefix():
    """The prefix ``gradsched cluster`` names its namespaces with when run in this process
    (``gs<pid>-``, its default), checked as :func:`prefix` is."""
    yield from _checked(f"gs{os.getpid()}-")


def _checked(name: str):
    before = set(_root_links())
    yield name
    leftovers = ours(name)
    record = cluster_record.record_path(name)
    assert leftovers == [], f"namespaces left behind: {leftovers}"
    assert not record.exists(), f"record left behind: {record}"
    our_links = re.compile(rf"^({cl.RANK_IFNAME}|{cl.BRIDGE}|r\d+)(@.*)?$")
    appeared = [n for n in set(_root_links()) - before if our_links.match(n)]
    assert appeared == [], f"links appeared in the host namespace: {appeared}"


# ----------------------------------------------------------------------------- no root needed


def test_layout_names_and_addresses():
    lay = cl.ClusterLayout(3, "gsX-")
    assert lay.namespaces == ["gsX-sw", "gsX-r0", "gsX-r1", "gsX-r2"]
    assert [lay.address(r) for r in range(3)] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]


# ----------------------------------------------------------------------------- root


@network
@needs_netns
def test_setup_and_teardown(prefix):
    with EmulatedCluster(3, "100mbit", prefix=prefix) as cluster:
        assert sorted(ours(prefix)) == sorted(cluster.layout.namespaces)
        qdiscs = subprocess.run(["tc", "-n", cluster.layout.namespace(1), "qdisc", "show",
                                 "dev", "veth0"], capture_output=True, text=True,
                                check=True).stdout
        assert "tbf" in qdiscs and "100Mbit" in qdiscs
        ports = subprocess.run(["tc", "-n", cluster.layout.switch, "qdisc", "show"],
                               capture_output=True, text=True, check=True).stdout
        assert ports.count("tbf") == 3  # the ingress side of each rank's link
        addr = subprocess.run([*cluster.prefix_for(2), "ip", "-br", "addr", "show", "veth0"],
                              capture_output=True, text=True, check=True).stdout
        assert "10.77.0.3/24" in addr
        cluster.close()  # idempotent: close twice
    assert ours(prefix) == []
    assert not cluster_record.record_path(prefix).exists()


@network
@needs_netns
def test_every_change_runs_with_termination_signals_held(prefix, monkeypatch):
    """A SIGTERM must take effect between build steps, never while ``subprocess`` starts
    ``ip``: an exception raised there leaves ``ip`` running on its own, and the namespace
    it creates appears after teardown has looked for it."""
    real_run = cl.run_ip
    unheld: list[str] = []

    def recording_run(cmd, **kwargs):
        changes = any(word in cmd for word in ("add", "set"))
        if changes and signal.getsignal(signal.SIGTERM) is cl.raise_exit:
            unheld.append(" ".join(cmd))
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(cl, "run_ip", recording_run)
    before = signal.getsignal(signal.SIGTERM)
    with EmulatedCluster(2, "100mbit", prefix=prefix):
        assert signal.getsignal(signal.SIGTERM) is cl.raise_exit
    assert unheld == []
    assert signal.getsignal(signal.SIGTERM) is before


@network
@needs_netns
def test_sigterm_during_a_namespace_add_is_delivered_after_it_is_recorded(prefix,
                                                                          monkeypatch):
    """The signal is sent to the process (the kernel may hand it to a BLAS thread that
    does not block it) just before ``ip netns add``; it must take effect only after the
    command returned and its namespace was recorded, and teardown must remove it."""
    real_run = cl.run_ip
    target = cl.ClusterLayout(2, prefix).namespace(0)
    finished: list[str] = []

    def signalled_run(cmd, **kwargs):
        if cmd[:3] == ["ip", "netns", "add"] and cmd[3] == target:
            os.kill(os.getpid(), signal.SIGTERM)
        out = real_run(cmd, **kwargs)
        finished.append(cmd[-1])
        return out

    monkeypatch.setattr(cl, "run_ip", signalled_run)
    cluster = EmulatedCluster(2, "100mbit", prefix=prefix)
    with pytest.raises(SystemExit) as exit_info:
        cluster.open()
    assert exit_info.value.code == 128 + signal.SIGTERM
    assert finished[-1] == target, "the signal cut the namespace's creation short"
    assert ours(prefix) == []
    assert signal.getsignal(signal.SIGTERM) is not cl.raise_exit


@network
@needs_netns
def test_teardown_after_exception(prefix):
    with pytest.raises(RuntimeError, match="boom"), EmulatedCluster(2, "1gbit", prefix=prefix):
        assert len(ours(prefix)) == 3
        raise RuntimeError("boom")
    assert ours(prefix) == []


@network
@needs_netns
@pytest.mark.slow
def test_teardown_after_crashed_rank(prefix):
    pytest.importorskip("torch")
    from gradsched.distributed import DistributedError, launch

    start = time.monotonic()
    with pytest.raises(DistributedError, match="rank 1 of 2 exited with code 17"), \
            EmulatedCluster(2, "1gbit", prefix=prefix) as cluster:
        launch("gradsched.distributed.tasks:die_on_rank", {"victim": 1},
               cluster.launch_spec(op_timeout_s=20, deadline_s=60))
    assert time.monotonic() - start < 45
    assert ours(prefix) == []


def _child(code: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=REPO_SRC)
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


_OPEN_AND_WAIT = (
    "import sys, time\n"
    "from gradsched.distributed.cluster import EmulatedCluster\n"
    "c = EmulatedCluster(2, '1gbit')\n"
    "c.open()\n"
    "print(c.layout.prefix, flush=True)\n"
    "{after}\n"
)


@network
@needs_netns
def test_sigterm_tears_down():
    child = _child(_OPEN_AND_WAIT.format(after="time.sleep(60)"))
    assert child.stdout is not None
    child_prefix = child.stdout.readline().strip()
    assert len(ours(child_prefix)) == 3
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=20) == 128 + signal.SIGTERM
    assert ours(child_prefix) == []


@network
@needs_netns
def test_leftovers_of_a_killed_run_are_removed():
    child = _child(_OPEN_AND_WAIT.format(
        after="import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert child.stdout is not None
    child_prefix = child.stdout.readline().strip()
    child.wait(timeout=20)
    assert len(ours(child_prefix)) == 3  # SIGKILL: no chance to clean up
    record = cluster_record.record_path(child_prefix)
    with pytest.raises(ClusterError, match="killed"):  # the prefix stays taken until cleaned
        EmulatedCluster(2, None, prefix=child_prefix, install_signal_handlers=False).open()
    assert len(ours(child_prefix)) == 3
    removed = cluster_record.clean_record(record)
    assert sorted(removed) == sorted(cl.ClusterLayout(2, child_prefix).namespaces)
    assert ours(child_prefix) == [] and not record.exists()


@network
@needs_netns
def test_cluster_command_runs_one_process_per_rank(cli_prefix, capsys):
    from gradsched.cli import main

    rc = main(["cluster", "--world-size", "2", "--rate", "100mbit", "--",
               "sh", "-c", 'echo "id={rank} $RANK/$WORLD_SIZE $MASTER_ADDR $GLOO_SOCKET_IFNAME"'])
    out = capsys.readouterr().out
    assert rc == 0
    assert "[rank 0] id=0 0/2 10.77.0.1 veth0" in out
    assert "[rank 1] id=1 1/2 10.77.0.1 veth0" in out


@network
@needs_netns
def test_cluster_command_stops_on_a_failing_rank(cli_prefix, capsys):
    from gradsched.cli import main

    start = time.monotonic()
    rc = main(["cluster", "--world-size", "2", "--rate", "1gbit", "--",
               "sh", "-c", 'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 60'])
    assert rc == 3
    assert time.monotonic() - start < 20
    assert "rank 1 exited with code 3" in capsys.readouterr().err


@network
@needs_netns
@pytest.mark.slow
def test_shaped_bandwidth_is_respected(cli_prefix, capsys):
    pytest.importorskip("torch")
    from gradsched.cli import main

    rc = main(["cluster", "check", "--world-size", "2", "--rate", "100mbit", "--bytes", "2M",
               "--iters", "3"])
    out = capsys.readouterr().out
    ratio = float(re.search(r"= ([0-9.]+) x the shaped rate", out).group(1))
    assert ratio < 1.3, out
    assert rc == 0, out
