"""The collectives bench through the CLI: a tiny real sweep, with ``--tuned-out``."""

from __future__ import annotations

from pathlib import Path

from gradsched.costmodel import load_comm_spec
from gradsched.traces import CommTrace


def test_bench_command_end_to_end(tmp_path: Path) -> None:
    """A tiny real sweep (P=2, gloo on loopback) through the CLI, with --tuned-out."""
    from gradsched.cli import main

    out, tuned = tmp_path / "b.csv", tmp_path / "t.json"
    code = main(["bench", "collectives", "--algorithms", "default,lp,rhd", "--world-size", "2",
                 "--min-bytes", "4", "--max-bytes", "16", "--min-iters", "1", "--max-iters",
                 "2", "--target-s", "0.001", "--deadline-s", "100", "-o", str(out),
                 "--tuned-out", str(tuned)])
    assert code == 0
    trace = CommTrace.load(out)
    assert set(trace.frame["algorithm"]) == {"default", "lp", "rhd"}
    assert sorted(trace.frame["bytes"].unique()) == [4, 8, 16]
    assert trace.meta["lp_chunk_bytes"]["2"]
    model = load_comm_spec(str(tuned))
    assert model.choose("all_reduce", 16, 2) in ("default", "lp", "rhd")
