"""``torchrun`` across two emulated nodes: a multi-node c10d rendezvous between two network
namespaces of the emulated cluster (gloo, CPU), exactly as between two machines.

Each node runs ``ip netns exec <node> python -m torch.distributed.run --nnodes 2
--nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint <node0>:29400 ...``. Two settings a
real cluster does not need, because there a host's name resolves to its address: node 0 is
told it hosts the rendezvous store (``--rdzv-conf is_host=1``; torchrun otherwise compares
the endpoint with the machine's hostname, which the namespaces share) and each node gives
its own address (``--local-addr``; otherwise the agents advertise ``localhost`` as
MASTER_ADDR). ``read_timeout`` and ``join_timeout`` bound the rendezvous (torch's
``c10d_rendezvous_backend`` and ``dynamic_rendezvous``), so a wrong endpoint or a missing
peer fails within seconds instead of torchrun's 60 s / 600 s defaults.

Checked: ``gradsched run --torchrun`` gives the local run's rows and collectives; the plan
executor run by the worker module under torchrun trains exactly as under
the local launcher; ``capture comm --torchrun`` gives a sweep of the local launcher's shape;
``capture iteration --torchrun`` writes a summary of the local launcher's shape; a node killed
mid-run, a peer that never starts and a wrong endpoint end every node with a non-zero status
and a message naming the cause, within the timeouts.
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

import pandas as pd
import pytest

from gradsched.distributed import cluster_record
from gradsched.distributed.cluster import EmulatedCluster
from tests.netns_support import needs_netns, ours

pytestmark = [pytest.mark.network, pytest.mark.slow, needs_netns]

PORT = 29400
SRC = str(Path(__file__).resolve().parents[2] / "src")
SWEEP = ["capture", "comm", "--collectives", "all_reduce,broadcast", "--min-bytes", "4",
         "--max-bytes", "4K", "--factor", "16", "--iters", "5", "--warmup", "1",
         "--min-iters", "2", "--time-budget-s", "0.2"]
WORKER = "gradsched.distributed.worker"
ITERATION = ["capture", "iteration", "--model", "tiny-mlp", "--batch-size", "4",
             "--iters", "2", "--warmup", "1", "--bucket-cap-mb", "1"]


@pytest.fixture
def cluster(request):
    prefix = f"gstr{os.getpid()}{request.node.name[-5:].replace('_', '')}-"
    with EmulatedCluster(2, None, prefix=prefix, install_signal_handlers=False) as c:
        yield c
    assert ours(prefix) == [], "namespaces left behind"
    assert not cluster_record.record_path(prefix).exists(), "record left behind"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


def start_node(c: EmulatedCluster, node: int, args: list[str], log: Path, *,
               endpoint: str | None = None, join_timeout: int = 30,
               is_host: bool | None = None, module: str = "gradsched") -> subprocess.Popen:
    """torchrun for node ``node`` in its namespace (its own session, so that the test can
    kill the whole node); output to ``log``."""
    endpoint = endpoint or f"{c.layout.address(0)}:{PORT}"
    host = node == 0 if is_host is None else is_host
    rdzv = f"join_timeout={join_timeout},read_timeout=10,is_host={int(host)}"
    cmd = [*c.prefix_for(node), "env", *[f"{k}={v}" for k, v in c.rank_env(node).items()],
           sys.executable, "-P", "-m", "torch.distributed.run", "--nnodes", "2",
           "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
           "--rdzv-id", "gradsched-test", "--rdzv-conf", rdzv, "--max-restarts", "0",
           "--local-addr", c.layout.address(node), "-m", module, *args]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(),
                                start_new_session=True)
    c.record_process(proc.pid)
    return proc


def wait_all(procs: list[subprocess.Popen], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            pytest.fail(f"torchrun still running after {timeout:.0f} s (a hang)")
    return codes


def local(args: list[str], timeout: float = 180) -> None:
    proc = subprocess.run([sys.executable, "-P", "-m", "gradsched", *args], env=_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_capture_comm_across_two_nodes_has_the_local_sweeps_shape(cluster, tmp_path):
    out = tmp_path / "torchrun.csv"
    procs = [start_node(cluster, n, [*SWEEP, "--torchrun", "-o", str(out)],
                        tmp_path / f"node{n}.log") for n in range(2)]
    assert wait_all(procs, 120) == [0, 0], [(tmp_path / f"node{n}.log").read_text()[-2000:]
                                            for n in range(2)]
    local([*SWEEP, "--world-size", "2", "-o", str(tmp_path / "local.csv")])
    there, here = pd.read_csv(out), pd.read_csv(tmp_path / "local.csv")
    assert list(there.columns) == list(here.columns)
    keys = ["collective", "world_size", "bytes"]
    pd.testing.assert_frame_equal(there[keys].reset_index(drop=True),
                                  here[keys].reset_index(drop=True))
    assert (there["time_s"] > 0).all()


def test_capture_iteration_across_two_nodes_has_the_local_summarys_shape(cluster, tmp_path):
    out = tmp_path / "torchrun"
    procs = [start_node(cluster, n, [*ITERATION, "--torchrun", "-o", str(out)],
                        tmp_path / f"node{n}.log") for n in range(2)]
    assert wait_all(procs, 180) == [0, 0], [(tmp_path / f"node{n}.log").read_text()[-2000:]
                                            for n in range(2)]
    local([*ITERATION, "--world-size", "2", "-o", str(tmp_path / "local")])
    there = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    here = sorted(p.relative_to(tmp_path / "local").as_posix()
                  for p in (tmp_path / "local").rglob("*") if p.is_file())
    assert there == here
    for name in (n for n in here if n.endswith(".csv")):
        a, b = pd.read_csv(out / name), pd.read_csv(tmp_path / "local" / name)
        assert list(a.columns) == list(b.columns) and len(a) == len(b), name


def test_gradsched_run_across_two_nodes_has_the_local_runs_shape(cluster, tmp_path):
    from gradsched.plan import Bucket, Plan
    from gradsched.workloads import build_model

    ready = [n for n, _ in build_model("tiny-mlp", 4).model.named_parameters()][::-1]
    Plan("wfbp", tuple(Bucket((n,)) for n in ready)).save(tmp_path / "wfbp.json")
    run = ["run", "--plan", str(tmp_path / "wfbp.json"), "--baseline", "ddp", "--model",
           "tiny-mlp", "--batch-size", "4", "--world-size", "2", "--iters", "3", "--warmup",
           "1", "--timeout-s", "60"]
    procs = [start_node(cluster, n, [*run, "--torchrun", "-o", str(tmp_path / "t.csv")],
                        tmp_path / f"node{n}.log") for n in range(2)]
    assert wait_all(procs, 180) == [0, 0], [(tmp_path / f"node{n}.log").read_text()[-2000:]
                                            for n in range(2)]
    local([*run, "-o", str(tmp_path / "l.csv")])
    for name in ("t.csv", "t.summary.csv"):
        there = pd.read_csv(tmp_path / name)
        here = pd.read_csv(tmp_path / name.replace("t.", "l.", 1))
        assert list(there.columns) == list(here.columns)
        keys = [c for c in ("algorithm", "plan", "iteration", "world_size", "n_collectives")
                if c in here.columns]
        pd.testing.assert_frame_equal(there[keys], here[keys])
        assert set(there["bandwidth"]) == {"torchrun"}


def test_executor_under_torchrun_equals_the_local_launcher_exactly(cluster, tmp_path):
    """The plan executor's exactness cases (tests/runtime/test_executor.py) through the
    worker module under torchrun (``env://``) and through the local launcher: the same
    parameters after training, bit for bit, on every rank."""
    from gradsched.distributed import LaunchSpec, launch
    from tests.runtime.test_executor import BATCH, CASES, STEPS

    payload = {"cases": CASES[:3], "timeout_s": 60,
               "ddp": [{"id": "ddp", "model": CASES[0]["model"],
                        "optimizer": CASES[0]["optimizer"], "steps": STEPS, "batch": BATCH}]}
    (tmp_path / "payload.json").write_text(json.dumps(payload))
    args = ["--task", "gradsched.runtime.tasks:exactness_cases", "--workdir", str(tmp_path),
            "--op-timeout-s", "60"]
    procs = [start_node(cluster, n, args, tmp_path / f"node{n}.log", module=WORKER)
             for n in range(2)]
    assert wait_all(procs, 180) == [0, 0], [(tmp_path / f"node{n}.log").read_text()[-2000:]
                                            for n in range(2)]
    there = [json.loads((tmp_path / f"rank{r}.result.json").read_text()) for r in range(2)]
    here = launch("gradsched.runtime.tasks:exactness_cases", payload,
                  LaunchSpec(2, op_timeout_s=60, deadline_s=300))
    assert [sorted(r["cases"]) for r in there] == [sorted(r["cases"]) for r in here]
    for r in range(2):
        for case in there[r]["cases"]:
            assert there[r]["cases"][case]["params"] == here[r]["cases"][case]["params"], case
        assert there[r]["ddp"] == here[r]["ddp"]


def test_a_dead_node_ends_every_rank_with_a_clear_message(cluster, tmp_path):
    long_sweep = ["capture", "comm", "--collectives", "all_reduce", "--min-bytes", "4",
                  "--max-bytes", "64M", "--factor", "2", "--iters", "200", "--warmup", "1",
                  "--time-budget-s", "5", "--timeout-s", "30", "--torchrun",
                  "-o", str(tmp_path / "never.csv")]
    logs = [tmp_path / f"node{n}.log" for n in range(2)]
    procs = [start_node(cluster, n, long_sweep, logs[n]) for n in range(2)]
    deadline = time.monotonic() + 60
    # Both ranks joined their process group: each rank's store client logs one more line
    # after the agent's (c10d's hostname warning in these namespaces); then the sweep runs.
    while min(p.read_text().count("[c10d]") for p in logs) < 2:
        assert time.monotonic() < deadline, [p.read_text()[-1500:] for p in logs]
        assert all(p.poll() is None for p in procs)
        time.sleep(0.2)
    time.sleep(3.0)
    assert all(p.poll() is None for p in procs), "the sweep ended before the node was killed"
    # Node 1 dies: every process in its namespace at once (agent and rank).
    pids = subprocess.run(["ip", "netns", "pids", cluster.layout.namespace(1)],
                          capture_output=True, text=True, check=True).stdout.split()
    for pid in map(int, pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    codes = wait_all(procs, 90)
    assert codes[0] != 0 and codes[1] == -signal.SIGKILL
    text = logs[0].read_text()
    assert "ChildFailedError" in text or "failed" in text.lower(), text[-2000:]
    assert "a collective failed, most likely a peer rank or its node died" in text, text[-3000:]
    assert "internal error" not in text, text[-3000:]
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "never.csv").exists()


def test_a_missing_peer_ends_the_node_within_the_join_timeout(cluster, tmp_path):
    log = tmp_path / "node0.log"
    t0 = time.monotonic()
    proc = start_node(cluster, 0, [*SWEEP, "--torchrun", "-o", str(tmp_path / "x.csv")], log,
                      join_timeout=10)
    assert wait_all([proc], 90) != [0]
    assert time.monotonic() - t0 < 60
    text = log.read_text()
    assert "RendezvousTimeoutError" in text, text[-2000:]


def test_a_wrong_rendezvous_endpoint_is_a_clear_error_not_a_hang(cluster, tmp_path):
    # No node has this address (on a real cluster neither host would take it for its own).
    wrong = "10.77.0.99:29400"
    logs = [tmp_path / f"node{n}.log" for n in range(2)]
    t0 = time.monotonic()
    procs = [start_node(cluster, n, [*SWEEP, "--torchrun", "-o", str(tmp_path / "x.csv")],
                        logs[n], endpoint=wrong, is_host=False) for n in range(2)]
    codes = wait_all(procs, 120)
    assert all(code != 0 for code in codes)
    assert time.monotonic() - t0 < 100
    for log in logs:
        text = log.read_text()
        assert "10.77.0.99" in text and ("RendezvousConnectionError" in text
                                         or "failed to connect" in text), text[-2000:]
