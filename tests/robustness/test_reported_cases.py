"""The outside tester's report, re-run case by case (44 cases in families A to G).

One parametrised case per reported failure, named ``<family>-<what>``. A refusal must end
with exit status 1 or 2 and one clear line on stderr (an ``error:`` line; argparse's usage
block before it is allowed), with no traceback, no C++ frame and no ``internal error``, and
must leave the folder as it was (no output, no staging folder, no temporary file). Two
cases expect success instead (``E-advise-sharded-plan-out``, ``F-long-output-name``): exit 0
and the file written. In family A (control bytes in data files) a refusal or an escaped
output are both right; in every case no control character other than newline and tab may
reach stdout or stderr.

Most cases run in this process through :func:`gradsched.cli.main` with the file
descriptors captured (``capfd``: a C++ frame written straight to fd 2 is seen too); the
``run --torchrun`` environment cases and ``gpu_check.py`` run in a fresh process with a
60 s timeout. All inputs are SYNTHETIC, written below into the test's own folder; the
``shard run`` cases stop any rank start (none may begin before the plan is refused).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gradsched.cli import main
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

REPO = Path(__file__).resolve().parents[2]

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0/C1 controls but newline and tab, DEL, line separators, bidirectional overrides."""

ESC = "\x1b]0;pwned\x07\x1b[2J"
"""A terminal title change and a screen clear."""


# ---------------------------------------------------------------------- SYNTHETIC inputs
def _copy_meta(d: Path, src: str, dst: str) -> None:
    (d / f"{dst}.meta.json").write_text((d / f"{src}.meta.json").read_text(encoding="utf-8"),
                                        encoding="utf-8")


def _write(d: Path, name: str, data: object) -> None:
    (d / name).write_text(data if isinstance(data, str) else json.dumps(data),
                          encoding="utf-8")


def _escaped_backend(d: Path) -> None:
    """A comm trace whose ``backend`` cells hold an escape byte."""
    text = (d / "m.csv").read_text(encoding="utf-8")
    (d / "esc.csv").write_text(text.replace("gloo", f"gl{ESC}oo"), encoding="utf-8")
    _copy_meta(d, "m", "esc")


def _escaped_name(d: Path) -> None:
    """A compute trace whose tensor name (written twice, so that an error quotes it) holds
    an escape byte."""
    lines = (d / "c.csv").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace("layer1.weight", "layer0.weight")
    text = "\n".join(lines) + "\n"
    (d / "name.csv").write_text(text.replace("layer0.weight", f"lay{ESC}er0.weight"),
                                encoding="utf-8")
    _copy_meta(d, "c", "name")


def _escaped_sidecar(d: Path) -> None:
    """A compute trace whose sidecar strings (model, source, notes) hold an escape byte."""
    (d / "side.csv").write_text((d / "c.csv").read_text(encoding="utf-8"), encoding="utf-8")
    meta = json.loads((d / "c.meta.json").read_text(encoding="utf-8"))
    meta.update(model=f"synthetic{ESC}", source=f"SYNTHETIC{ESC}", notes=f"SYNTHETIC{ESC}")
    _write(d, "side.meta.json", meta)


SHARDED_FORMAT = {"format": "gradsched.sharded_plan", "format_version": 1,
                  "algorithm": "synthetic"}


def _sharded_plan(name: str, units: Callable[[], list[list[str]]]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        _write(d, name, {**SHARDED_FORMAT, "units": [{"tensors": t} for t in units()]})
    return setup


def _resnet18_units() -> list[list[str]]:
    """resnet18's parameters, one unit per top-level module: a plan for another model."""
    from gradsched.runtime.coverage import model_parameters

    blocks: dict[str, list[str]] = {}
    for name in model_parameters("resnet18", 1, None):
        blocks.setdefault(name.split(".")[0], []).append(name)
    return list(blocks.values())


def _hooked(d: Path) -> None:
    trace = synthetic_compute_trace(4)
    trace.meta.update({"forward_nohooks_s": 1e-3, "backward_nohooks_s": 2e-3,
                       "capture_overhead": 0.5})
    trace.save(d / "hooked.csv")


def _hook_free(median: Any) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        _hooked(d)
        _write(d, "s.json", {"hooked": {"cuda_event_medians_s": {
            "a": {"forward": median, "backward": 2e-3}}}})
    return setup


def _x(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": args}


COMM_ARGS = {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
             "Group size": 2, "dtype": "Float"}
TWO_STEPS = [_x("ProfilerStep#1", 0, 1000), _x("ProfilerStep#2", 1000, 1000),
             _x("record_param_comms", 100, 50, **COMM_ARGS), _x("aten::mm", 10, 50)]


def _kineto(events: list[dict[str, Any]] | None = None,
            info: Mapping[str, Any] | None = None) -> Callable[[Path], None]:
    """A SYNTHETIC (hand-written) CPU-style Kineto trace ``k.json``."""
    def setup(d: Path) -> None:
        _write(d, "k.json", {"traceEvents": TWO_STEPS if events is None else events,
                             "distributedInfo": {"backend": "gloo", "rank": 0,
                                                 "world_size": 2, **(info or {})}})
    return setup


def _deep_kineto(d: Path) -> None:
    """200 000 nested arrays in one event's ``args``."""
    text = json.dumps({"traceEvents": [_x("ProfilerStep#1", 0, 10, x="DEEP")]})
    (d / "deep.json").write_text(text.replace('"DEEP"', "[" * 200_000 + "]" * 200_000),
                                 encoding="utf-8")


def _wrapping_bytes(d: Path) -> None:
    """16 400 rows of 2^50 bytes: their sum (> 2^63) would wrap numpy's int64."""
    lines = (d / "c.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    rows = []
    for i in range(16_400):
        cells = lines[1].split(",")
        for key, value in (("name", f"l{i}.weight"), ("layer", str(i)),
                           ("numel", str(2**48)), ("bytes", str(2**50)),
                           ("ready_order", str(16_399 - i))):
            cells[header.index(key)] = value
        rows.append(",".join(cells))
    (d / "big.csv").write_text("\n".join([lines[0], *rows]) + "\n", encoding="utf-8")
    _copy_meta(d, "c", "big")


ANALYTIC = "{kind: analytic, alpha_s: 1.0e-6, beta_s_per_byte: 1.0e-10, algorithm: ring}"


def _topology(d: Path) -> None:
    _write(d, "t.yaml", f"nodes: {2**20}\nranks_per_node: {2**20}\nintra: {ANALYTIC}\n"
                        f"inter: {ANALYTIC}\n")


def _duplicate_key(d: Path) -> None:
    _write(d, "dup.yaml", f"nodes: 2\nranks_per_node: 2\nnodes: 4\nintra: {ANALYTIC}\n"
                          f"inter: {ANALYTIC}\n")


def _block_trace(d: Path) -> None:
    """The compute trace with block names (``blocks.<i>.weight``) a sharded layout groups."""
    text = (d / "c.csv").read_text(encoding="utf-8")
    (d / "b.csv").write_text(text.replace("\nlayer", "\nblocks."), encoding="utf-8")
    _copy_meta(d, "c", "b")
    _write(d, "inter.json", {"compute_slowdown": 1.0, "comm_slowdown": 1.0})


def _a_sharded_plan(d: Path) -> None:
    from gradsched.plan_sharded import ShardedPlan

    assert ShardedPlan.load(d / "p.json").units  # the layout shard run takes


def _manifest(d: Path) -> None:
    from tests.robustness.test_inputs_table import SYNTHETIC_NCCL

    _write(d, "nccl.txt", SYNTHETIC_NCCL)
    entry = ("  - file: nccl.txt\n    importer: nccl-tests\n    out: {out}\n"
             "    args: {{source: SYNTHETIC, hardware: none}}\n")
    _write(d, "same.yaml", "version: 1\nfiles:\n" + entry.format(out="same.csv")
           + entry.format(out="./same.csv"))


def _other_plan(d: Path) -> None:
    """A DDP plan whose bucket names a tensor the compute trace does not have."""
    _write(d, "other.json", {"format": "gradsched.plan", "format_version": 2,
                             "algorithm": "synthetic", "buckets": [{"tensors": ["not.a.tensor"]}]})


# -------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Case:
    """One reported failure: the command line (``{d}`` is the test's folder), its inputs
    and environment, and what must happen."""

    argv: tuple[str, ...]
    setup: Callable[[Path], None] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    expect: str = "refused"
    """``refused`` (exit 1 or 2, one line, nothing written), ``written`` (exit 0, the files
    of ``written`` there) or ``escaped`` (refused, or exit 0; no control byte either way)."""
    needles: tuple[str, ...] = ()
    """Text the error line must hold (the file or variable it is about)."""
    written: tuple[str, ...] = ()
    check: Callable[[Path], None] | None = None
    """Reads what a ``written`` case wrote (its folder given)."""
    process: str = "main"
    """``main`` (in this process), ``cli`` (``python -m gradsched``) or ``gpu_check``."""


def _refuse(*argv: str, setup: Callable[[Path], None] | None = None, **kw: Any) -> Case:
    return Case(tuple(" ".join(argv).split()), setup, **kw)


REPLAY = "replay --compute {d}/c.csv --comm {d}/m.csv"
TORCHRUN = ("run --torchrun --baseline ddp --model tiny-mlp --batch-size 2 --world-size 2 "
            "-o {d}/x.csv")
GOOD_ENV = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
SHARD_RUN = "shard run --model tiny-mlp --batch-size 2 --world-size 2 -o {d}/sr.csv --plan"
CORRECT = "traces correct {d}/hooked.csv -o {d}/fixed.csv --hook-free-summary {d}/s.json"
KINETO = "import kineto {d}/k.json -o {d}/out"
SHARDED = "advise --compute {d}/b.csv --comm {d}/m.csv --world-size 4 --sharded"
PLAN_FROM = "plan --from {d}/other.json --compute {d}/c.csv"


def _torchrun(**env: str) -> Case:
    return _refuse(TORCHRUN, env={**GOOD_ENV, **env}, process="cli",
                   needles=(f"${next(iter(env))}",))


CASES: dict[str, Case] = {
    # A. a data file writes to the terminal
    "A-fit-backend-escape-byte": _refuse("fit {d}/esc.csv", setup=_escaped_backend,
                                         expect="escaped"),
    "A-trace-name-escape-byte": _refuse("traces validate {d}/name.csv", setup=_escaped_name,
                                        expect="escaped"),
    "A-sidecar-strings-escape-byte": _refuse(
        "advise --compute {d}/side.csv --comm {d}/m.csv --world-size 4 --validate",
        setup=_escaped_sidecar, expect="escaped"),
    # B. a plan or a torchrun environment refused before any rank starts
    "B-shard-plan-naming-etc-shadow": _refuse(
        SHARD_RUN, "{d}/shadow.json",
        setup=_sharded_plan("shadow.json", lambda: [["../../../etc/shadow"]]),
        needles=("shadow.json",)),
    "B-shard-resnet18-plan-for-tiny-mlp": _refuse(
        SHARD_RUN, "{d}/resnet18.json", setup=_sharded_plan("resnet18.json", _resnet18_units),
        needles=("resnet18.json", "tiny-mlp")),
    "B-torchrun-RANK=abc": _torchrun(RANK="abc"),
    "B-torchrun-MASTER_PORT=99999": _torchrun(MASTER_PORT="99999"),
    "B-torchrun-MASTER_PORT=http": _torchrun(MASTER_PORT="http"),
    "B-torchrun-RANK=5-WORLD_SIZE=2": _torchrun(RANK="5", WORLD_SIZE="2"),
    "B-torchrun-RANK=-1": _torchrun(RANK="-1"),
    "B-torchrun-MASTER_ADDR-unresolvable": _torchrun(MASTER_ADDR="no-such-host.invalid"),
    "B-torchrun-MASTER_ADDR-empty": _torchrun(MASTER_ADDR=""),
    # C. numbers checked where they are read
    "C-hook-free-median-text": _refuse(CORRECT, setup=_hook_free("0.01"), needles=("s.json",)),
    "C-hook-free-median-zero": _refuse(CORRECT, setup=_hook_free(0), needles=("s.json",)),
    "C-hook-free-median-list": _refuse(CORRECT, setup=_hook_free([0.01, 0.02]),
                                       needles=("s.json",)),
    "C-hook-free-median-1e308": _refuse(CORRECT, setup=_hook_free(1e308), needles=("s.json",)),
    "C-hook-free-median-negative": _refuse(CORRECT, setup=_hook_free(-1), needles=("s.json",)),
    "C-kineto-overlapping-steps": _refuse(KINETO, setup=_kineto(
        [_x("ProfilerStep#1", 0, 1000), _x("ProfilerStep#2", 500, 1000)]),
        needles=("k.json",)),
    "C-kineto-timestamp-minus-1e12us": _refuse(KINETO, setup=_kineto(
        [_x("ProfilerStep#1", -1e12, 1000)]), needles=("k.json",)),
    "C-kineto-duration-1e308": _refuse(KINETO, setup=_kineto(
        [_x("ProfilerStep#1", 0, 1e308)]), needles=("k.json",)),
    "C-kineto-group-size-0": _refuse(KINETO, setup=_kineto(
        [_x("ProfilerStep#1", 0, 1000),
         _x("record_param_comms", 100, 50, **{**COMM_ARGS, "Group size": 0})]),
        needles=("k.json", "Group size")),
    "C-kineto-world-size-0": _refuse(KINETO, setup=_kineto(info={"world_size": 0}),
                                     needles=("k.json", "world_size")),
    "C-kineto-rank-7-of-2": _refuse(KINETO, setup=_kineto(info={"rank": 7}),
                                    needles=("k.json", "rank")),
    "C-kineto-rank-is-a-path": _refuse(KINETO, setup=_kineto(info={"rank": "../../etc/passwd"}),
                                       needles=("k.json", "rank")),
    "C-kineto-same-file-as-two-ranks": _refuse(
        "import kineto {d}/k.json {d}/k.json -o {d}/out", setup=_kineto(),
        needles=("k.json",)),
    "C-kineto-step-99-missing": _refuse(KINETO, "--step 99", setup=_kineto(),
                                        needles=("k.json", "99")),
    "C-kineto-200000-nested-arrays": _refuse(
        "import kineto {d}/deep.json -o {d}/out", setup=_deep_kineto, needles=("deep.json",)),
    "C-inventory-byte-sum-wraps-int64": _refuse(
        "traces inventory {d}/big.csv -o {d}/inv.csv", setup=_wrapping_bytes,
        needles=("big.csv",)),
    # D. limits
    "D-max-input-bytes-0": _refuse("traces inventory {d}/c.csv -o {d}/inv.csv",
                                   env={"GRADSCHED_MAX_INPUT_BYTES": "0"},
                                   needles=("GRADSCHED_MAX_INPUT_BYTES",)),
    "D-max-input-bytes-empty": _refuse("traces inventory {d}/c.csv -o {d}/inv.csv",
                                       env={"GRADSCHED_MAX_INPUT_BYTES": ""},
                                       needles=("GRADSCHED_MAX_INPUT_BYTES",)),
    "D-max-input-bytes-1e9": _refuse("traces inventory {d}/c.csv -o {d}/inv.csv",
                                     env={"GRADSCHED_MAX_INPUT_BYTES": "1e9"},
                                     needles=("GRADSCHED_MAX_INPUT_BYTES",)),
    "D-topology-2**40-ranks": _refuse("replay --compute {d}/c.csv --topology {d}/t.yaml "
                                      "-o {d}/o.csv", setup=_topology, needles=("t.yaml",)),
    "D-sharded-plan-no-units": _refuse(
        SHARD_RUN, "{d}/units.json", setup=_sharded_plan("units.json", list),
        needles=("units.json", "units")),
    "D-knob-unit_mb=1e308": _refuse(
        "shard plan --compute {d}/c.csv --comm {d}/m.csv --world-size 4 --algorithm fsdp2-cap "
        "--knob unit_mb=1e308 -o {d}/sp.json", needles=("unit_mb",)),
    # E. options accepted and ignored
    "E-advise-sharded-plan-out": Case(
        tuple(f"{SHARDED} --plan-out {{d}}/p.json".split()), _block_trace, expect="written",
        written=("p.json",), check=_a_sharded_plan),
    "E-advise-sharded-caps": _refuse(SHARDED, "--caps 1,2", setup=_block_trace,
                                     needles=("--caps", "--sharded")),
    "E-advise-sharded-interference": _refuse(SHARDED, "--interference {d}/inter.json",
                                             setup=_block_trace,
                                             needles=("--interference", "--sharded")),
    # F. ambiguity
    "F-yaml-key-twice": _refuse("replay --compute {d}/c.csv --topology {d}/dup.yaml "
                                "-o {d}/o.csv", setup=_duplicate_key,
                                needles=("dup.yaml", "nodes")),
    "F-manifest-same-csv-and-dot-same-csv": _refuse(
        "import manifest {d}/same.yaml --src {d} -o {d}/mout", setup=_manifest,
        needles=("same.yaml",)),
    "F-plan-from-other-trace-names-plan": _refuse(PLAN_FROM, "--emit ddp", setup=_other_plan,
                                                  needles=("other.json",)),
    "F-plan-from-without-emit-names-plan": _refuse(PLAN_FROM, "-o {d}/x.json",
                                                   setup=_other_plan, needles=("other.json",)),
    "F-long-output-name-244-bytes": Case(
        tuple(f"{REPLAY} -o {{d}}/{'r' * 240}.csv".split()), expect="written",
        written=("r" * 240 + ".csv",)),
    # G. gpu_check.py's options (refused by argparse before anything touches a GPU)
    "G-gpu-check-budget-s-nan": Case(("--out", "{d}/out", "--budget-s", "nan"),
                                     process="gpu_check", needles=("--budget-s",)),
    "G-gpu-check-threads-0": Case(("--out", "{d}/out", "--threads", "0"),
                                  process="gpu_check", needles=("--threads",)),
}


def test_the_table_is_the_reported_list() -> None:
    """44 cases: A 3, B 9, C 16, D 6, E 3, F 5, G 2."""
    families: dict[str, int] = {}
    for name in CASES:
        families[name[0]] = families.get(name[0], 0) + 1
    assert families == {"A": 3, "B": 9, "C": 16, "D": 6, "E": 3, "F": 5, "G": 2}


# ------------------------------------------------------------------------ the runner

def _files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def _error_line(err: str) -> str:
    """The one line of ``err``, after argparse's usage block (``usage:`` and its indented
    continuation lines) if any; fails on anything else."""
    lines = err.strip("\n").splitlines()
    if lines and lines[0].startswith("usage: "):
        lines = lines[1:]
        while lines and lines[0][:1].isspace():
            lines = lines[1:]
    assert len(lines) == 1, f"not one line on stderr:\n{err}"
    return lines[0]


def _execute(case: Case, d: Path, capfd: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    argv = [a.replace("{d}", str(d)) for a in case.argv]
    if case.process == "main":
        for key, value in case.env.items():
            monkeypatch.setenv(key, value)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out = capfd.readouterr()
        return code, out.out, out.err
    env = {**os.environ, **case.env, "PYTHONPATH": str(REPO / "src"),
           "CUDA_VISIBLE_DEVICES": ""}
    env.pop("GRADSCHED_TRACEBACK", None)
    command = [sys.executable, "-m", "gradsched", *argv] if case.process == "cli" \
        else [sys.executable, str(REPO / "benchmarks" / "gpu" / "gpu_check.py"), *argv]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=d,
                          timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_reported_case(name: str, tmp_path: Path, no_ranks: list[str],
                       capfd: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    d = tmp_path
    synthetic_compute_trace(8).save(d / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(d / "m.csv")
    if case.setup is not None:
        case.setup(d)
    before = _files(d)
    code, out, err = _execute(case, d, capfd, monkeypatch)

    printed = CONTROL.findall(out + err)
    assert not printed, f"control characters {printed!r} printed:\n{out}{err}"
    for marker in ("Traceback", "frame #", "c10::", "internal error"):
        assert marker not in err, err
    assert no_ranks == [], "a rank started before the refusal"

    if case.expect == "written":
        assert code == 0, err
        for path in case.written:
            assert (d / path).is_file(), path
        if case.check is not None:
            case.check(d)
        assert not [p for p in _files(d) - before if p.endswith((".tmp", ".staging"))]
        return
    if case.expect == "escaped" and code == 0:
        assert ESC not in out + err
        return
    assert code in (1, 2), f"exit {code}: {err}"
    line = _error_line(err)
    assert "error:" in line, line
    for needle in case.needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert _files(d) == before, f"written: {sorted(_files(d) - before)}"
