"""``gradsched batch``: the workflow's per-case steps in one process give the bytes the same
commands give one process each, each with its own log; the first failure stops the batch.

Inputs: a committed ResNet-18 compute trace and gloo sweeps (traces/)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.commands.batch import parse_jobs
from gradsched.errors import InputError

REPO = Path(__file__).resolve().parents[2]
COMPUTE = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
SWEEPS = [REPO / f"traces/comm/cpu/gloo-tbf1gbit-p{p}.csv" for p in (2, 3)]


def _replay(comm: Path, out: Path) -> list[str]:
    return ["replay", "--compute", str(COMPUTE), "--comm", str(comm), "--algorithms",
            "wfbp,mgwfbp", "--replay-iters", "3", "-o", str(out)]


def test_a_batch_writes_what_one_process_per_command_writes(tmp_path: Path) -> None:
    lines = []
    for i, comm in enumerate(SWEEPS):
        lines.append(shlex.join([str(tmp_path / f"logs/r{i}.log"),
                                 *_replay(comm, tmp_path / f"batch/r{i}.csv")]))
    lines.append(shlex.join([str(tmp_path / "logs/fit.log"), "fit", str(SWEEPS[0]),
                             "--model", "alpha-beta", "--table", str(tmp_path / "batch/f.csv")]))
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("# the workflow writes these\n\n" + "\n".join(lines) + "\n",
                    encoding="utf-8")
    assert main(["batch", str(jobs)]) == 0
    for i, comm in enumerate(SWEEPS):
        assert main(_replay(comm, tmp_path / f"alone/r{i}.csv")) == 0
        assert (tmp_path / f"batch/r{i}.csv").read_bytes() == \
            (tmp_path / f"alone/r{i}.csv").read_bytes()
        assert "fastest:" in (tmp_path / f"logs/r{i}.log").read_text(encoding="utf-8")
    assert main(["fit", str(SWEEPS[0]), "--model", "alpha-beta", "--table",
                 str(tmp_path / "alone/f.csv")]) == 0
    assert (tmp_path / "batch/f.csv").read_bytes() == (tmp_path / "alone/f.csv").read_bytes()


def test_the_first_failure_stops_the_batch_naming_its_line(tmp_path: Path) -> None:
    """Through stdin, as the rules hand it: line 2 fails (no such trace); line 3 never
    runs; the exit status is the failed command's."""
    lines = [shlex.join([str(tmp_path / "a.log"), *_replay(SWEEPS[0], tmp_path / "a.csv")]),
             shlex.join([str(tmp_path / "b.log"),
                         *_replay(tmp_path / "missing.csv", tmp_path / "b.csv")]),
             shlex.join([str(tmp_path / "c.log"), *_replay(SWEEPS[1], tmp_path / "c.csv")])]
    proc = subprocess.run([sys.executable, "-P", "-m", "gradsched", "batch", "-"],
                          input="\n".join(lines), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "<stdin>, line 2 failed (exit 2)" in proc.stderr
    assert "missing.csv" in (tmp_path / "b.log").read_text(encoding="utf-8")
    assert (tmp_path / "a.csv").is_file() and not (tmp_path / "c.csv").exists()
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("text, needle", [
    ("log.txt 'unclosed\n", "line 1: No closing quotation"),
    ("\nlog.txt\n", "line 2: give the log file, then the command"),
    ("log.txt batch other.txt\n", "line 1: a batch does not run a batch"),
])
def test_a_bad_job_line_is_named(text: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        parse_jobs(text, "jobs.txt")
