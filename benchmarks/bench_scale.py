"""Scale: the replay and the lower bound at 1,000 / 10,000 / 50,000 tensors (SYNTHETIC
traces), and ``advise`` on the published LLM shapes at 1,024 ranks (FLOPs-model traces,
labelled synthetic). Run: make bench. Wall and CPU seconds come from pytest-benchmark; the
peak of Python allocations (tracemalloc) is recorded in each benchmark's extra_info.

ByteScheduler with a credit of many partitions keeps many collectives in flight at once: the
list schedule's cost per event must not grow with them (virtual clocks,
``gradsched.replay.list_schedule.joint_schedule``)."""

from __future__ import annotations

import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.plan import Bucket, Plan
from gradsched.replay import lower_bound, replay
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(20e-6, 1 / 10e9)
SLOW = AlphaBetaModel(20e-6, 1 / 1e7)
"""A network slow enough for the synthetic tensors that the credit, not the wire, limits how
many collectives are in flight."""
SIZES = (1_000, 10_000, 50_000)


def _traced(benchmark, function, *args):
    tracemalloc.start()
    result = function(*args)
    benchmark.extra_info["peak_python_MiB"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result


@pytest.mark.parametrize("n", SIZES)
def test_replay_bytescheduler_many_in_flight(benchmark, n: int) -> None:
    trace = synthetic_compute_trace(n, seed=2)
    order = list(trace.ready_sequence()["name"])
    chunks = min(4, 100_000 // n)  # within the replay's collective budget
    plan = Plan("bytescheduler", tuple(Bucket((name,), chunks=chunks, priority=i)
                                       for i, name in enumerate(order)),
                update="per_layer", credit_bytes=1024 * float(trace.frame["bytes"].mean()))
    _traced(benchmark, replay, trace, plan, SLOW, 64)
    result = benchmark.pedantic(replay, args=(trace, plan, SLOW, 64), rounds=1, iterations=1)
    assert result.iteration_s > 0


@pytest.mark.parametrize("n", SIZES)
def test_lower_bound(benchmark, n: int) -> None:
    trace = synthetic_compute_trace(n, seed=3)
    _traced(benchmark, lower_bound, trace, MODEL, 1024)
    assert benchmark.pedantic(lower_bound, args=(trace, MODEL, 1024), rounds=3,
                              iterations=1).lower_bound_s > 0


@pytest.fixture(scope="module")
def llm_traces(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("llm")
    out = {}
    for name in ("llama-2-70b", "gpt3-175b", "deepseek-v3"):
        out[name] = folder / f"{name}.csv"
        subprocess.run([sys.executable, "-m", "gradsched", "traces", "flops", "--model", name,
                        "-o", str(out[name])], check=True, capture_output=True, timeout=600)
    return out


COMMANDS = {  # the four answers a user at LLM scale asks for
    "advise": ["advise"],
    "advise-sharded": ["advise", "--sharded"],
    "plan-best": ["plan", "--algorithm", "best", "-o", "{out}/plan.json"],
    "shard-plan": ["shard", "plan", "--algorithm", "sharded-optimum", "--gpu-memory", "141G",
                   "-o", "{out}/sharded.json"],
}
"""``shard plan`` at 141 GiB (an H200's): at the trace's 80 GiB no layout of whole blocks of
DeepSeek-V3 fits, and the command says so instead of writing a plan."""


@pytest.mark.parametrize("name", ["llama-2-70b", "gpt3-175b", "deepseek-v3"])
@pytest.mark.parametrize("what", sorted(COMMANDS))
def test_llm_at_1024_ranks(benchmark, llm_traces: dict, name: str, what: str,
                           tmp_path: Path) -> None:
    """One command in a fresh process: wall from the benchmark, CPU seconds and peak
    resident memory from the child's rusage."""
    words = [w.format(out=tmp_path) for w in COMMANDS[what]]
    command = [sys.executable, "-m", "gradsched", *words, "--compute", str(llm_traces[name]),
               "--comm", "alpha-beta:alpha=20e-6,beta=1e-10", "--world-size", "1024"]

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, timeout=1200)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = benchmark.pedantic(run, rounds=1, iterations=1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    benchmark.extra_info["cpu_s"] = (after.ru_utime - before.ru_utime
                                     + after.ru_stime - before.ru_stime)
    benchmark.extra_info["peak_rss_MiB"] = after.ru_maxrss / 1024
    benchmark.extra_info["exit_status"] = proc.returncode
    benchmark.extra_info["last_line"] = (proc.stdout or proc.stderr).strip().splitlines()[-1:]
    assert proc.returncode == 0, proc.stderr[-2000:]
