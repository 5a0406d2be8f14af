"""The collective sweep (``gradsched capture comm``): a real 2-rank gloo sweep on loopback,
and failures that end the run quickly and leave no output behind."""

from __future__ import annotations

import argparse
import functools
import time

import pytest

from gradsched import cli
from gradsched.capture import sweep
from gradsched.capture.sweep_settings import (
    SweepConfig,
)
from gradsched.commands import capture as capture_cmd
from gradsched.errors import ConfigError


@pytest.mark.slow
def test_two_rank_gloo_sweep_writes_a_valid_comm_trace(tmp_path):
    pytest.importorskip("torch")
    from gradsched.traces import CommTrace

    out = tmp_path / "gloo-loopback-p2.csv"
    rc = cli.main(["capture", "comm", "--world-size", "2", "--collectives", "all",
                     "--min-bytes", "4", "--max-bytes", "1M", "--factor", "8",
                     "--iters", "10", "--warmup", "2", "--time-budget-s", "2", "-o", str(out)])
    # 10 repetitions: the capture refuses a series whose fastest repetition gets faster with
    # more data, and on a loaded 2-core machine all of 5 can stall at the smallest size
    assert rc == 0
    trace = CommTrace.load(out)
    frame = trace.frame
    assert set(frame["collective"]) == {"all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast"}
    assert (frame["time_s"] > 0).all()
    assert (frame["time_min_s"] <= frame["time_s"]).all()
    assert (frame["time_s"] <= frame["time_max_s"]).all()
    split = frame[frame["collective"].isin(["all_gather", "reduce_scatter"])]
    assert (split["bytes"] % 8 == 0).all() and (split["in_place"] == 0).all()
    ar = frame[frame["collective"] == "all_reduce"].sort_values("bytes")
    assert ar["bytes"].tolist() == [4, 32, 256, 2048, 16384, 131072, 1048576]
    assert (ar["busbw_Bps"] == ar["algbw_Bps"]).all()  # factor 1 at n = 2
    # the fastest repetition (least disturbed by a loaded machine, e.g. the test suite's
    # other worker): 1 MiB takes longer than 4 B
    fastest = ar["time_min_s"].to_numpy()
    assert fastest[-1] > fastest[0]
    meta = trace.meta
    assert meta["kind"] == "comm" and meta["statistic"] == "median"
    assert meta["hardware"].endswith("loopback")
    assert meta["world_size"] == 2 and meta["nodes"] == 1
    assert meta["software"]["torch"]
    assert meta["iterations"]["all_reduce"]["4"] == 10
    assert any("rounded up" in w for w in meta["warnings"])


def _run_cli_expecting_failure(tmp_path, monkeypatch, capsys, **kwargs):
    pytest.importorskip("torch")
    monkeypatch.setattr(sweep, "run_sweep", functools.partial(sweep.run_sweep, **kwargs))
    out = tmp_path / "out" / "sweep.csv"
    start = time.monotonic()
    rc = cli.main(["capture", "comm", "--world-size", "2", "--collectives", "all_reduce",
                     "--max-bytes", "4K", "--iters", "3", "--warmup", "1",
                     "--init-timeout-s", "5", "--timeout-s", "15", "--deadline-s", "60",
                     "-o", str(out)])
    elapsed = time.monotonic() - start
    assert rc == 2
    assert elapsed < 45
    assert not out.exists() and not out.with_name("sweep.meta.json").exists()
    leftovers = list(out.parent.iterdir()) if out.parent.exists() else []
    assert leftovers == []  # no partial or temporary file
    return capsys.readouterr().err


@pytest.mark.slow
def test_dead_rank_ends_sweep_clearly_without_output(tmp_path, monkeypatch, capsys):
    err = _run_cli_expecting_failure(
        tmp_path, monkeypatch, capsys,
        payload_extra={"fault": {"rank": 1, "collective": "all_reduce", "bytes": 64}})
    assert "rank 1 of 2 exited with code 17" in err


@pytest.mark.slow
def test_unreachable_peer_ends_sweep_clearly_without_output(tmp_path, monkeypatch, capsys):
    # rank 1 never starts a worker: rank 0 cannot form the group and gives up.
    err = _run_cli_expecting_failure(
        tmp_path, monkeypatch, capsys,
        spec_overrides={"prefixes": [[], ["sh", "-c", "sleep 30", "--"]], "init_timeout_s": 3})
    assert "rank 0 of 2" in err and "could not join" in err


def test_register_cli_adds_comm():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    capture_cmd._add_comm(sub)
    args = parser.parse_args(["comm", "--max-bytes", "64K", "--cluster", "100mbit",
                              "-o", "x.csv"])
    config = capture_cmd.comm_config(args)
    assert isinstance(config, SweepConfig)
    assert config.max_bytes == 65536 and config.cluster_rate == "100mbit"
    bad = parser.parse_args(["comm", "--cluster", "fast", "-o", "x.csv"])
    with pytest.raises(ConfigError, match="rate"):
        capture_cmd.comm_config(bad)


@pytest.mark.slow
def test_torchrun_mode_rank0_writes_the_trace(tmp_path):
    """``--torchrun``: ranks come from torchrun's environment (set here by hand, as torchrun
    would, to avoid its agent's start-up cost); only rank 0 writes."""
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys
    from pathlib import Path

    from gradsched.distributed.launch import free_port
    from gradsched.traces import CommTrace

    out = tmp_path / "tr.csv"
    src = str(Path(sweep.__file__).resolve().parents[2])
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1", RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gradsched", "capture", "comm", "--torchrun",
             "--collectives", "all_reduce", "--max-bytes", "1K", "--iters", "3",
             "--warmup", "1", "--init-timeout-s", "30", "-o", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=90)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "wrote" in outputs[0] and "wrote" not in outputs[1]
    trace = CommTrace.load(out)
    assert set(trace.frame["world_size"]) == {2} and set(trace.frame["nodes"]) == {1}
    assert trace.meta["hardware"].endswith("torchrun, 1 host(s)")


@pytest.mark.slow
def test_two_rank_gloo_p2p_pingpong_writes_a_valid_comm_trace(tmp_path):
    """Loopback ping-pong, small sizes: rows are one-way times of a 2-rank p2p series."""
    pytest.importorskip("torch")
    from gradsched.traces import CommTrace

    out = tmp_path / "p2p.csv"
    rc = cli.main(["capture", "comm", "--world-size", "2", "--collectives", "p2p",
                     "--min-bytes", "4", "--max-bytes", "256K", "--factor", "64",
                     "--iters", "5", "--warmup", "2", "--time-budget-s", "0.2",
                     "-o", str(out)])
    assert rc == 0
    trace = CommTrace.load(out)
    frame = trace.frame
    assert set(frame["collective"]) == {"p2p"}
    assert frame["bytes"].tolist() == [4, 256, 16384]
    assert (frame["world_size"] == 2).all() and (frame["in_place"] == 0).all()
    assert (frame["time_min_s"] <= frame["time_s"]).all()
    assert (frame["time_s"] <= frame["time_max_s"]).all()
    assert (frame["busbw_Bps"] == frame["algbw_Bps"]).all()
    assert trace.meta["iterations"]["p2p"]["4"] == 5
    assert "osu_latency" in trace.meta["notes"]


@pytest.mark.slow
def test_p2p_dead_peer_ends_sweep_clearly_without_output(tmp_path, monkeypatch, capsys):
    """Rank 1 dies before its receive: rank 0, blocked in send/recv, must not hang."""
    pytest.importorskip("torch")
    monkeypatch.setattr(sweep, "run_sweep", functools.partial(
        sweep.run_sweep, payload_extra={"fault": {"rank": 1, "collective": "p2p",
                                                  "bytes": 64}}))
    out = tmp_path / "out" / "p2p.csv"
    start = time.monotonic()
    rc = cli.main(["capture", "comm", "--world-size", "2", "--collectives", "p2p",
                   "--max-bytes", "4K", "--iters", "3", "--warmup", "1", "--init-timeout-s", "5",
                     "--timeout-s", "15", "--deadline-s", "60", "-o", str(out)])
    assert rc == 2 and time.monotonic() - start < 45
    assert not out.exists() and not (out.parent.exists() and list(out.parent.iterdir()))
    assert "rank 1 of 2 exited with code 17" in capsys.readouterr().err
