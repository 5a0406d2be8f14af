"""What an output may and may not be (``docs/errors.md``, "Outputs").

Every output option goes through one pre-flight before the command runs: an existing
target that is not a regular file is refused (a symbolic link, FIFO, socket, folder or block
device) unless it is a character device or this process's stream, which is written through;
an output equal to an input or to another output is refused; an unwritable output is
refused before any measurement. A failed commit of several outputs restores the previous
files. Errors name the user's path, never a temporary file. All inputs are SYNTHETIC; the
``/dev`` cases run in a private mount namespace with its own tmpfs ``/dev``
(:mod:`tests.robustness.mountns`), never on the real one.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gradsched.commands.advise as advise_command
from gradsched import io as gio
from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.staging import Staging
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace
from tests.robustness.mountns import needs_mountns, run_with_private_dev

SYNTHETIC_NCCL = """\
# SYNTHETIC nccl-tests log written for the output tests (not measured)
# Collective test starting: all_reduce_perf
#  Rank  0 Group  0 Pid  101 on  hostA device  0 [0000:04:00] none
#  Rank  1 Group  0 Pid  201 on  hostB device  0 [0000:04:00] none
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.00    0.00    0.00      0    11.00    0.00    0.00      0
          16             4     float     sum      -1    12.00    0.00    0.00      0    13.00    0.00    0.00      0
"""  # noqa: E501


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder of SYNTHETIC inputs: compute trace c.csv, comm trace m.csv, nccl log."""
    synthetic_compute_trace(8).save(tmp_path / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(tmp_path / "m.csv")
    (tmp_path / "nccl.txt").write_text(SYNTHETIC_NCCL, encoding="utf-8")
    (tmp_path / "run.meta.json").write_text('{"traceEvents": []}', encoding="utf-8")
    return tmp_path


def _plan(d: Path, output: str) -> list[str]:
    return ["plan", "--compute", str(d / "c.csv"), "--comm", str(d / "m.csv"),
            "--algorithm", "wfbp", "-o", output]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry of ``folder``: a file's bytes, a link's target, or the entry's kind."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            out[str(path)] = "link -> " + os.readlink(path)
        elif stat.S_ISREG(mode):
            out[str(path)] = path.read_bytes()
        else:
            out[str(path)] = f"mode {stat.S_IFMT(mode):o}"
    return out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")
                  if p.name.endswith((".staging", ".tmp", ".kept")))


# --------------------------------------------------------------- /dev, in a private /dev
_IN_NAMESPACE = textwrap.dedent("""\
    import json, os, stat, subprocess, sys
    argv = json.loads(sys.argv[1])
    done = subprocess.run([sys.executable, "-m", "gradsched", *argv],
                          capture_output=True, text=True)
    info = os.lstat("/dev/null")
    print(json.dumps({"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
                      "char": stat.S_ISCHR(info.st_mode),
                      "rdev": [os.major(info.st_rdev), os.minor(info.st_rdev)],
                      "stdout_link": os.path.islink("/dev/stdout"),
                      "dev": sorted(os.listdir("/dev"))}))
    """)


def _in_private_dev(argv: list[str]) -> dict[str, object]:
    done = run_with_private_dev([sys.executable, "-c", _IN_NAMESPACE, json.dumps(argv)],
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_mountns
def test_dev_null_is_written_through_not_replaced(work: Path) -> None:
    result = _in_private_dev(_plan(work, "/dev/null"))
    assert result["rc"] == 0, result["stderr"]
    assert result["char"] and result["rdev"] == [1, 3]  # still the null device
    assert result["dev"] == ["null", "stderr", "stdout"]  # no temporary file left in /dev


@needs_mountns
def test_dev_null_as_one_of_several_outputs(work: Path) -> None:
    argv = ["replay", "--compute", str(work / "c.csv"), "--comm", str(work / "m.csv"),
            "--algorithms", "wfbp,ddp", "-o", "/dev/null", "--plans", str(work / "plans")]
    result = _in_private_dev(argv)
    assert result["rc"] == 0, result["stderr"]
    assert result["char"] and result["rdev"] == [1, 3]
    assert result["dev"] == ["null", "stderr", "stdout"]
    assert sorted(p.name for p in (work / "plans").iterdir()) == ["ddp.plan.json",
                                                                "wfbp.plan.json"]
    assert _leftovers(work) == []


@needs_mountns
def test_dev_stdout_is_written_through(work: Path) -> None:
    result = _in_private_dev(_plan(work, "/dev/stdout"))
    assert result["rc"] == 0, result["stderr"]
    assert '"algorithm": "wfbp"' in str(result["stdout"])  # the plan went to stdout
    assert result["stdout_link"]  # the link is still a link


# ------------------------------------------------------------- targets that are refused
def test_symlink_output_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "keep.json").write_text("precious\n", encoding="utf-8")
    (work / "link.json").symlink_to(work / "keep.json")
    before = _snapshot(work)
    code, err = _run(_plan(work, str(work / "link.json")), capsys)
    assert code == 2 and "symbolic link" in err and "-o/--output" in err
    assert _snapshot(work) == before  # the link and its target untouched


def test_dangling_symlink_output_is_refused(work: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (work / "link.json").symlink_to(work / "nowhere.json")
    code, err = _run(_plan(work, str(work / "link.json")), capsys)
    assert code == 2 and "symbolic link" in err
    assert (work / "link.json").is_symlink() and not (work / "nowhere.json").exists()


def test_fifo_output_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(work / "pipe")
    code, err = _run(_plan(work, str(work / "pipe")), capsys)  # a write would block here
    assert code == 2 and "FIFO" in err
    assert stat.S_ISFIFO((work / "pipe").lstat().st_mode)


def test_folder_output_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "out").mkdir()
    (work / "out" / "inside.txt").write_text("x", encoding="utf-8")
    before = _snapshot(work)
    code, err = _run(_plan(work, str(work / "out")), capsys)
    assert code == 2 and "folder" in err
    assert _snapshot(work) == before


def test_socket_output_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = work / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        code, err = _run(_plan(work, str(path)), capsys)
    assert code == 2 and "socket" in err
    assert stat.S_ISSOCK(path.lstat().st_mode)


def test_block_device_output_is_refused(work: Path) -> None:
    path = work / "blk"
    try:
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a block device node here: {exc}")
    with pytest.raises(InputError, match="block device"):
        gio.write_text_atomic(path, "x")
    assert stat.S_ISBLK(path.lstat().st_mode)


def test_symlink_is_refused_by_the_writer_itself(tmp_path: Path) -> None:
    """Not only the command line: every atomic write refuses to rename over a link."""
    (tmp_path / "target.txt").write_text("keep", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
    with pytest.raises(InputError, match="symbolic link"):
        gio.write_text_atomic(tmp_path / "link.txt", "new")
    with pytest.raises(InputError, match="symbolic link"), Staging() as stage:
        stage.file(tmp_path / "link.txt")
    assert (tmp_path / "target.txt").read_text(encoding="utf-8") == "keep"
    assert (tmp_path / "link.txt").is_symlink() and _leftovers(tmp_path) == []


# --------------------------------------------------------------- an output is an input
def _same_as_input(d: Path) -> list[tuple[str, list[str], str]]:
    """(name, argv, the input that argv names as an output)."""
    c, m, log = str(d / "c.csv"), str(d / "m.csv"), str(d / "nccl.txt")
    return [
        ("replay", ["replay", "--compute", c, "--comm", m, "-o", c], "c.csv"),
        ("plan", ["plan", "--compute", c, "--comm", m, "--algorithm", "wfbp", "-o", m],
         "m.csv"),
        ("plan-sidecar", ["plan", "--compute", c, "--comm", m, "--algorithm", "wfbp", "-o",
                          str(d / "c.meta.json")], "c.meta.json"),
        ("fit", ["fit", m, "-o", m], "m.csv"),
        ("fit-table", ["fit", m, "--table", m], "m.csv"),
        ("import", ["import", "nccl-tests", log, "-o", log], "nccl.txt"),
        ("advise", ["advise", "--compute", c, "--comm", m, "--json", c], "c.csv"),
        ("advise-plan-out", ["advise", "--compute", c, "--comm", m, "--plan-out", m],
         "m.csv"),
        ("import-kineto-prefix", ["import", "kineto", str(d / "run.meta.json"),
                                  "-o", str(d / "run")], "run.meta.json"),
        ("hard-link", ["replay", "--compute", c, "--comm", m, "-o", str(d / "hard.csv")],
         "c.csv"),
        ("other-spelling", ["replay", "--compute", c, "--comm", m,
                            "-o", str(d / "sub" / ".." / "c.csv")], "c.csv"),
    ]


@pytest.mark.parametrize("case", [name for name, _, _ in _same_as_input(Path("."))])
def test_output_equal_to_an_input_is_refused(case: str, work: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    os.link(work / "c.csv", work / "hard.csv")
    (work / "sub").mkdir()
    argv, victim = next((a, v) for n, a, v in _same_as_input(work) if n == case)
    before = _snapshot(work)
    code, err = _run(argv, capsys)
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert "same file as the input" in last, last
    assert _snapshot(work) == before, f"{victim} changed"


@pytest.mark.parametrize("argv", [
    ["fit", "{d}/m.csv", "-o", "{d}/out.json", "--table", "{d}/out.json"],
    ["replay", "--compute", "{d}/c.csv", "--comm", "{d}/m.csv", "-o", "{d}/r.csv",
     "--plans", "{d}/r.csv"],
    ["reexec", "analyze", "--input", "{d}/m.csv", "--table", "{d}/t.tex", "--md",
     "{d}/./t.tex"],
], ids=["fit-model-and-table", "replay-results-and-plans", "reexec-table-and-md"])
def test_two_outputs_on_one_path_are_refused(argv: list[str], work: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = _snapshot(work)
    code, err = _run([a.replace("{d}", str(work)) for a in argv], capsys)
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    options = [a for a in argv if a.startswith("-") and a != "-o"]
    assert "name the same" in last and all(o in last for o in options[-1:]), last
    assert _snapshot(work) == before


# ------------------------------------------------------------ checked before any work
@pytest.mark.parametrize("where", ["below-a-file", "symlink"])
def test_advise_validate_refuses_its_json_before_measuring(
        where: str, work: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the measurement ran before the output was checked")

    import gradsched.reexec.validate as validate_module  # what --validate loads when it runs

    monkeypatch.setattr(validate_module, "validate", must_not_run)
    monkeypatch.setattr(advise_command, "advise", must_not_run)
    target = work / "c.csv" / "advice.json"
    if where == "symlink":
        target = work / "advice.json"
        target.symlink_to(work / "elsewhere.json")
    code, err = _run(["advise", "--compute", str(work / "c.csv"), "--comm",
                      str(work / "m.csv"), "--validate", "--model", "tiny-mlp",
                      "--batch-size", "2", "--json", str(target)], capsys)
    assert code == 2 and "--json" in err, err


# -------------------------------------------------------------- all or none, for real
def _fail_on(monkeypatch: pytest.MonkeyPatch, victim: Path) -> None:
    """Make the first rename of a stand-in onto ``victim`` fail (EIO), as a full disk
    might (the rollback's renames succeed)."""
    real = os.replace
    failed: list[bool] = []

    def replace(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if Path(str(dst)) == victim and ".staging" in str(src) and not failed:
            failed.append(True)
            raise OSError(errno.EIO, "Input/output error", str(dst))
        real(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("existing", [True, False], ids=["previous-files", "new-files"])
def test_failed_commit_restores_the_previous_outputs(
        existing: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "sub" / "b.csv"
    if existing:
        b.parent.mkdir()
        a.write_text("old a\n", encoding="utf-8")
        b.write_text("old b\n", encoding="utf-8")
    before = _snapshot(tmp_path)
    _fail_on(monkeypatch, b)
    with pytest.raises((OSError, InputError)) as caught, Staging() as stage:
        gio.write_text_atomic(stage.file(a), "new a\n")
        gio.write_text_atomic(stage.file(b), "new b\n")
    assert str(b) in str(caught.value) and ".staging" not in str(caught.value)
    assert _snapshot(tmp_path) == before  # the first output moved back, old files restored
    assert _leftovers(tmp_path) == []


def test_failed_commit_of_folders_restores_them(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "plans"
    out.mkdir()
    (out / "x.json").write_text("old x", encoding="utf-8")
    (out / "y.json").write_text("old y", encoding="utf-8")
    before = _snapshot(tmp_path)
    _fail_on(monkeypatch, out / "y.json")
    with pytest.raises((OSError, InputError)), Staging() as stage:
        folder = stage.folder(out)
        for name in ("x.json", "y.json", "z.json"):
            gio.write_text_atomic(folder / name, f"new {name}")
    assert _snapshot(tmp_path) == before and _leftovers(tmp_path) == []


# ------------------------------------------------------------- errors name the user's path
def test_a_failed_write_names_the_output_not_the_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "out.csv"
    with pytest.raises(InputError) as caught:
        gio.write_text_atomic(target, "x")
    assert str(caught.value).startswith(f"{target}: ") and ".tmp" not in str(caught.value)
    with pytest.raises(InputError) as caught, Staging() as stage:
        gio.write_text_atomic(stage.file(target), "x")
    assert str(caught.value).startswith(f"{target}: ") and ".staging" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_replay_write_names_the_users_path(
        work: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = work / "r.csv"
    code, err = _run(["replay", "--compute", str(work / "c.csv"), "--comm",
                      str(work / "m.csv"), "-o", str(out), "--plans", str(work / "p")],
                     capsys)
    assert code == 2 and "No space left" in err
    named = err.split("error: ", 1)[1].split(": cannot write", 1)[0]
    assert named == str(out) or named.startswith(f"{work / 'p'}/"), named  # the user's path
    assert ".staging" not in err and ".tmp" not in err
    assert not out.exists() and not (work / "p").exists() and _leftovers(work) == []


def test_every_output_option_is_declared() -> None:
    """No option that names an output escapes the pre-flight: every path-typed option
    whose name says output is declared with output_file/output_folder."""
    from gradsched.cli import build_parser
    from gradsched.commands._outputs import OUTPUTS_KEY

    parser = build_parser()
    stack = [parser]
    declared = 0
    while stack:
        current = stack.pop()
        outputs, _ = current.get_default(OUTPUTS_KEY)
        declared += len(outputs)
        for action in current._actions:
            if action.type is Path and any(
                    s in ("-o", "--output", "--json", "--table", "--md", "--tex", "--png",
                          "--figdir", "--tabdir", "--timeline", "--plans", "--comm-out",
                          "--compute-out", "--tuned-out", "--plan-out")
                    for s in action.option_strings):
                raise AssertionError(f"{action.option_strings} of {current.prog} is typed "
                                     "Path, not output_file/output_folder")
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                stack.extend(v for v in action.choices.values()
                             if hasattr(v, "_actions"))
    assert declared >= 60


def test_refusal_from_the_console_script_is_one_line(work: Path) -> None:
    """A subprocess call of the console entry point answers with exit 2 and one line."""
    done = subprocess.run([sys.executable, "-m", "gradsched", "plan", "--compute",
                           str(work / "c.csv"), "--comm", str(work / "m.csv"),
                           "--algorithm", "wfbp", "-o", str(work / "m.csv")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--comm" in done.stderr
