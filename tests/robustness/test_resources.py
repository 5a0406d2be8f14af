"""Resources are checked before launch (``gradsched.admission``): ranks beyond the CPUs or
the process limits, memory beyond what is available, inputs that inflate beyond a bound and
sweeps of too many points are refused with one line -- what was asked, what the machine
has, how to proceed -- before any process starts.

The real fork and memory limits are exercised inside a cgroup created here (v2, or v1
where only v1 controllers are mounted) and removed afterwards; those tests skip, saying
why, where cgroups are not writable.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradsched import admission
from gradsched.admission import (
    OVERSUBSCRIPTION,
    ResourceError,
    check_input_size,
    check_memory,
    check_points,
    check_ranks,
    gunzip_bounded,
    usable_cpus,
)
from gradsched.cli import main
from gradsched.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
R18 = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"
LOOP2 = REPO / "traces/comm/cpu/gloo-loopback-p2.csv"

TOO_MANY = OVERSUBSCRIPTION * usable_cpus() + 1
"""A local world size beyond the default oversubscription of this machine."""


# --------------------------------------------------------------------------- helpers


def _children() -> set[int]:
    """Pids of this process's children (every thread's)."""
    out: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            out |= {int(p) for p in (task / "children").read_text().split()}
        except OSError:
            continue
    return out


RANK_PROGRAMS = frozenset({"ip", "tc", "nsenter", "unshare", "sh", "true", "torchrun"})
"""Programs a launch or a cluster starts (besides Python itself)."""


@pytest.fixture
def no_spawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records (and blocks) every attempt to start a rank -- a Python process, a network
    namespace or a shell -- and every fork; asserts afterwards that none was made and that
    no child appeared. Tools libraries run while loading (``ldconfig -p`` when torch loads)
    are let through."""
    attempts: list[str] = []
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self: subprocess.Popen[bytes], args: object, *rest: object,
                      **kwargs: object) -> None:
        argv = [str(a) for a in (args if isinstance(args, list | tuple) else [args])]
        if any("python" in Path(a).name or "gradsched" in a or Path(a).name in RANK_PROGRAMS
               for a in argv):
            attempts.append(" ".join(argv)[:200])
            raise AssertionError("a rank was started before admission refused")
        original(self, args, *rest, **kwargs)

    def fork(*args: object, **kwargs: object) -> None:
        attempts.append("fork")
        raise AssertionError("a process was forked before admission refused")

    before = _children()
    monkeypatch.setattr(subprocess.Popen, "_execute_child", execute_child)
    monkeypatch.setattr(os, "fork", fork)
    yield attempts
    assert attempts == []
    assert _children() <= before


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run the CLI in-process: exit 2 and one line holding ``needles`` and the message's
    three parts."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for needle in ("asks for", "this machine has", *needles):
        assert needle in err, err
    return err


# --------------------------------------------------------------------------- ranks

RANK_COMMANDS = {
    "capture comm": ["capture", "comm", "--world-size", str(TOO_MANY), "-o", "{tmp}/c.csv"],
    "capture iteration": ["capture", "iteration", "--model", "tiny-mlp", "--batch-size", "2",
                          "--world-size", str(TOO_MANY), "-o", "{tmp}/it"],
    "run": ["run", "--model", "tiny-mlp", "--batch-size", "2", "--world-size", str(TOO_MANY),
            "--baseline", "ddp", "-o", "{tmp}/r.csv"],
    "bench collectives": ["bench", "collectives", "--world-size", f"2,{TOO_MANY}",
                          "-o", "{tmp}/b.csv"],
    "compress train": ["compress", "train", "--world-size", str(min(TOO_MANY, 1024)),
                       "-o", "{tmp}/t"],
    "reexec interference": ["reexec", "interference", "--world-size", str(TOO_MANY),
                            "-o", "{tmp}/i.json"],
    "advise --validate": ["advise", "--compute", str(R18), "--comm", "alpha-beta:alpha=1e-5,"
                          "beta=1e-9", "--world-size", str(TOO_MANY), "--validate"],
    "cluster": ["cluster", "--world-size", str(TOO_MANY), "--rate", "none", "--", "true"],
    "shard measure": ["shard", "measure", "--model", "resnet18", "--batch-size", "16",
                      "--world-size", str(TOO_MANY), "--network", "loopback", "--compute",
                      str(R18), "--comm", "alpha-beta:alpha=1e-5,beta=1e-9", "-o", "{tmp}/m"],
}


@pytest.mark.parametrize("name", sorted(RANK_COMMANDS))
def test_ranks_beyond_the_cpus_are_refused_before_any_process(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        no_spawn: list[str]) -> None:
    if TOO_MANY > 1024 and name == "compress train":
        pytest.skip("this machine runs 1024 ranks (compress train's largest world size)")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in RANK_COMMANDS[name]]
    _refused(capsys, argv, f"{TOO_MANY} local ranks", "usable CPUs", "--oversubscribe")
    assert list(tmp_path.iterdir()) == []  # no output folder either


def test_oversubscribe_does_not_lift_the_process_limit(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        no_spawn: list[str]) -> None:
    monkeypatch.setattr(admission, "process_headroom", lambda: (40, "the pids cgroup's pids.max"))
    _refused(capsys, ["capture", "comm", "--world-size", "16", "--oversubscribe",
                      "-o", str(tmp_path / "c.csv")], "room for 40 more tasks", "pids.max")


def test_a_million_ranks_are_refused_even_with_oversubscribe(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spawn: list[str]) -> None:
    """2**20 ranks pass the option's range; the kernel's task limit refuses them."""
    if admission.process_headroom()[0] is None:
        pytest.skip("no process limit is readable here")
    _refused(capsys, ["capture", "comm", "--world-size", str(2**20), "--oversubscribe",
                      "-o", str(tmp_path / "c.csv")], "more tasks")


def test_check_ranks_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "usable_cpus", lambda: 2)
    monkeypatch.setattr(admission, "process_headroom", lambda: (None, "no process limit"))
    check_ranks("x", 8)  # 4 per CPU
    with pytest.raises(ResourceError, match="9 local ranks x 1 threads = 9 threads"):
        check_ranks("x", 9)
    with pytest.raises(ResourceError, match="2 local ranks x 5 threads"):
        check_ranks("x", 2, 5)
    check_ranks("x", 1000, oversubscribe=True)
    monkeypatch.setattr(admission, "process_headroom", lambda: (90, "RLIMIT_NPROC 100"))
    check_ranks("x", 10, oversubscribe=True)  # 10 x 9 = 90 tasks
    with pytest.raises(ResourceError, match="RLIMIT_NPROC"):
        check_ranks("x", 11, oversubscribe=True)


def test_usable_cpus_follows_the_affinity_mask() -> None:
    assert usable_cpus() == len(os.sched_getaffinity(0))


# --------------------------------------------------------------------------- memory


@pytest.mark.parametrize("argv,needle", [
    (["capture", "comm", "--max-bytes", "1048576G", "-o", "{tmp}/c.csv"], "largest message"),
    (["bench", "collectives", "--max-bytes", "1048576G", "-o", "{tmp}/b.csv"],
     "largest message"),
    (["reexec", "interference", "--comm-bytes", "1048576G", "-o", "{tmp}/i.json"],
     "--comm-bytes"),
    (["compress", "profile", "--sizes", "1K,1048576G", "-o", "{tmp}/p.csv"],
     "largest bucket"),
    (["run", "--model", "tiny-mlp", "--batch-size", str(2**60), "--world-size", "2",
      "--baseline", "ddp", "-o", "{tmp}/r.csv"], "activation bytes per sample"),
    (["capture", "compute", "--model", "tiny-mlp", "--batch-size", str(2**60),
      "-o", "{tmp}/c.csv"], "activation bytes per sample"),
], ids=["capture comm", "bench collectives", "reexec interference", "compress profile", "run",
        "capture compute"])
def test_memory_beyond_memavailable_is_refused(argv: list[str], needle: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               no_spawn: list[str]) -> None:
    if admission.available_memory()[0] is None:
        pytest.skip("MemAvailable is not readable here")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    _refused(capsys, argv, "available", needle)
    assert list(tmp_path.iterdir()) == []


def test_the_memory_estimate_scales_with_ranks_and_batch(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        no_spawn: list[str]) -> None:
    """With 3 GiB available, resnet18 at batch 64 on 2 ranks does not fit: the estimate is
    ranks x (interpreter + 4 x parameters + activations x batch)."""
    pytest.importorskip("torch")
    monkeypatch.setattr(admission, "available_memory", lambda: (3 << 30, "MemAvailable"))
    err = _refused(capsys, ["run", "--model", "resnet18", "--batch-size", "64",
                            "--world-size", "2", "--baseline", "ddp",
                            "-o", str(tmp_path / "r.csv")], "on 2 rank(s)", "model resnet18")
    assert "3 GiB available (MemAvailable" in err


def test_advise_validate_does_not_trust_the_sidecars_batch_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spawn: list[str]) -> None:
    trace = tmp_path / R18.name
    shutil.copy(R18, trace)
    meta = json.loads(R18.with_suffix(".meta.json").read_text())
    # 2**40 is beyond any batch a sidecar may hold (refused when the sidecar is read);
    # 2**30 is a valid sidecar value but above what advise --validate runs
    for batch, needle in ((2**40, "field 'batch_size'"), (2**30, "field 'meta.batch_size'"),
                          (10**6, "GiB available")):
        meta["batch_size"] = batch
        trace.with_suffix(".meta.json").write_text(json.dumps(meta))
        assert main(["advise", "--compute", str(trace), "--comm", str(LOOP2),
                     "--validate"]) == 2
        err = capsys.readouterr().err
        assert needle in err, err
        assert "Traceback" not in err


def test_check_memory_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "available_memory", lambda: (10 << 30, "MemAvailable"))
    check_memory("x", 1 << 30, 4)  # 4 x 1.25 GiB <= 9 GiB
    with pytest.raises(ResourceError) as caught:
        check_memory("x", 3 << 30, 4, proceed="lower it")
    assert caught.value.what == "x" and caught.value.proceed == "lower it"
    assert str(caught.value) == ("x: asks for about 13 GiB on 4 rank(s); this machine has "
                                 "10 GiB available (MemAvailable; at most 90% of it is used); "
                                 "lower it")
    assert isinstance(caught.value, ConfigError)  # exit status 2


# --------------------------------------------------------------------------- inputs


def _bomb(path: Path, gib: float = 1.0) -> Path:
    """A multi-member gzip file of about 1 MiB that inflates to ``gib`` GiB of JSON-ish
    zeros (one 1 MiB member, repeated)."""
    member = gzip.compress(b"0" * (1 << 20), compresslevel=9)
    path.write_bytes(member * int(gib * 1024))
    return path


def test_gzip_bomb_stops_at_the_bound(tmp_path: Path) -> None:
    raw = _bomb(tmp_path / "bomb.json.gz").read_bytes()
    assert len(raw) < 4 << 20
    start = time.monotonic()
    with pytest.raises(ResourceError, match="more than 16 MiB once decompressed"):
        gunzip_bounded(raw, "bomb.json.gz", limit=16 << 20)
    assert time.monotonic() - start < 10  # stopped at 16 MiB, never inflated the gigabyte


def test_gunzip_bounded_reads_every_member_and_refuses_corrupt_data() -> None:
    data = gzip.compress(b"abc") + gzip.compress(b"def") + b"\0\0"
    assert gunzip_bounded(data, "x", limit=6) == b"abcdef"
    with pytest.raises(ResourceError):
        gunzip_bounded(data, "x", limit=5)
    with pytest.raises((zlib.error, EOFError)):
        gunzip_bounded(gzip.compress(b"x" * 1000)[:-12], "x", limit=1 << 20)


@pytest.mark.parametrize("suffix", [".json.gz", ".tar.gz"])
def test_import_kineto_refuses_a_gzip_bomb_quickly(
        suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GRADSCHED_MAX_INPUT_BYTES", str(16 << 20))
    if suffix == ".json.gz":
        bomb = _bomb(tmp_path / f"bomb{suffix}")
    else:  # a tar of one large member of zeros, gzipped: 64 MiB from about 64 KiB
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("rank0.json")
            info.size = 64 << 20
            tar.addfile(info, io.BytesIO(b"0" * info.size))
        bomb = tmp_path / f"bomb{suffix}"
        bomb.write_bytes(gzip.compress(buf.getvalue(), compresslevel=9))
    start = time.monotonic()
    err = _refused(capsys, ["import", "kineto", str(bomb), "-o", str(tmp_path / "out")],
                   str(bomb), "GRADSCHED_MAX_INPUT_BYTES")
    assert "once decompressed" in err
    assert time.monotonic() - start < 20


def test_an_input_file_beyond_the_bound_is_not_read(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.json"
    with sparse.open("wb") as handle:  # a hole: no disk, no memory
        handle.truncate(admission.MAX_INPUT_BYTES + 1)
    with pytest.raises(ResourceError, match="reading"):
        check_input_size(sparse)
    from gradsched.traces.importers.kineto.events import read_trace_json

    with pytest.raises(ResourceError):
        read_trace_json(sparse)


@pytest.mark.parametrize("value", ["1_000", "１６", "-1", "0", ""])
def test_the_input_bound_override_is_checked(value: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADSCHED_MAX_INPUT_BYTES", value)
    with pytest.raises(ConfigError, match="GRADSCHED_MAX_INPUT_BYTES"):
        admission.input_limit()


# --------------------------------------------------------------------------- points


@pytest.mark.parametrize("argv", [
    ["capture", "comm", "--factor", "1.001", "--min-bytes", "4", "--max-bytes", "1G",
     "-o", "{tmp}/c.csv"],
    ["capture", "comm", "--factor", "1.005", "--max-bytes", "1G", "--collectives",
     "all_reduce,all_gather,reduce_scatter,broadcast,reduce", "-o", "{tmp}/c.csv"],
    ["bench", "collectives", "--per-octave", "64", "--min-bytes", "4", "--max-bytes",
     "1048576G", "--world-size", "2,3,4", "-o", "{tmp}/b.csv"],
    ["compress", "profile", "--sizes", ",".join(f"{k}K" for k in range(1, 1200)),
     "-o", "{tmp}/p.csv"],
], ids=["capture comm sizes", "capture comm collectives", "bench collectives",
        "compress profile"])
def test_too_many_sweep_points_are_refused(argv: list[str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str],
                                           no_spawn: list[str]) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    _refused(capsys, argv, "measurement points", "points per sweep")


def test_check_points_units() -> None:
    check_points("x", admission.MAX_SWEEP_POINTS)
    with pytest.raises(ResourceError, match="10001 measurement points"):
        check_points("x", admission.MAX_SWEEP_POINTS + 1)


# --------------------------------------------------------------------------- cgroups


class _Cgroup:
    """A cgroup created for one test (v2 where its root delegates pids and memory, else
    the v1 ``pids`` and ``memory`` hierarchies), removed afterwards."""

    def __init__(self) -> None:
        name = f"gradsched-test-{uuid.uuid4().hex[:8]}"
        root = Path("/sys/fs/cgroup")
        enabled = set()
        if (root / "cgroup.subtree_control").is_file():
            enabled = set((root / "cgroup.subtree_control").read_text().split())
        if {"pids", "memory"} <= enabled:
            self.dirs = {"pids": root / name, "memory": root / name}
            self.files = {"pids": "pids.max", "memory": "memory.max"}
        elif (root / "pids" / "tasks").is_file() and (root / "memory" / "tasks").is_file():
            self.dirs = {"pids": root / "pids" / name, "memory": root / "memory" / name}
            self.files = {"pids": "pids.max", "memory": "memory.limit_in_bytes"}
        else:
            pytest.skip("no cgroup hierarchy with the pids and memory controllers here")
        try:
            for folder in set(self.dirs.values()):
                folder.mkdir()
        except OSError as exc:
            self.remove()
            pytest.skip(f"cgroups are not writable here: {exc}")

    def limit(self, controller: str, value: int) -> None:
        (self.dirs[controller] / self.files[controller]).write_text(str(value))

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """``python -m gradsched ARGV`` inside the cgroup (the shell joins it, then execs)."""
        joins = " ".join(f"echo $$ > {d / 'cgroup.procs'};" for d in set(self.dirs.values()))
        cmd = [sys.executable, "-m", "gradsched", *argv]
        return subprocess.run(["sh", "-c", f'{joins} exec "$@"', "sh", *cmd],
                              env={**os.environ, "PYTHONPATH": str(SRC)},
                              capture_output=True, text=True, timeout=300, check=False)

    def remove(self) -> None:
        for folder in set(getattr(self, "dirs", {}).values()):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


@pytest.fixture
def cgroup() -> Iterator[_Cgroup]:
    if os.geteuid() != 0:
        pytest.skip("creating a cgroup needs root")
    group = _Cgroup()
    try:
        yield group
    finally:
        group.remove()
    assert not any(d.exists() for d in group.dirs.values())


def test_ranks_beyond_pids_max_are_refused_inside_a_cgroup(cgroup: _Cgroup,
                                                           tmp_path: Path) -> None:
    cgroup.limit("pids", 40)
    out = tmp_path / "c.csv"
    proc = cgroup.run(["capture", "comm", "--world-size", "8", "--oversubscribe",
                       "-o", str(out)])
    assert proc.returncode == 2, proc.stderr
    assert "pids cgroup" in proc.stderr and "8 local ranks" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    events = cgroup.dirs["pids"] / "pids.events"
    if events.is_file():  # no fork ever hit the limit: nothing was started and refused
        assert "max 0" in events.read_text()


def test_buffers_beyond_memory_max_are_refused_inside_a_cgroup(cgroup: _Cgroup,
                                                               tmp_path: Path) -> None:
    cgroup.limit("memory", 1 << 30)
    out = tmp_path / "c.csv"
    proc = cgroup.run(["capture", "comm", "--world-size", "2", "--max-bytes", "512M",
                       "-o", str(out)])
    assert proc.returncode == 2, proc.stderr
    assert "memory cgroup" in proc.stderr and "largest message" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_launch_itself_checks_the_process_limit(monkeypatch: pytest.MonkeyPatch,
                                                no_spawn: list[str]) -> None:
    """The last line of defence, for callers of the package that skip the commands."""
    from gradsched.distributed.launch import LaunchSpec, launch

    monkeypatch.setattr(admission, "process_headroom", lambda: (5, "RLIMIT_NPROC 5"))
    with pytest.raises(ResourceError, match="room for 5 more tasks"):
        launch("gradsched.capture.sweep_rank:sweep_task", {}, LaunchSpec(2))
