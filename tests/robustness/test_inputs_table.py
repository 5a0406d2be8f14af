# ruff: noqa: E501  (the embedded log keeps the real column widths)
"""Every malformed input gets a clear error: one line, exit status 2, nothing left behind
(the "inputs" family of the robustness suite: one bad input per entry point; README.md).

Table-driven: each row is a command line of one ``gradsched`` entry point with one bad
input, the class of defect it probes, and a piece of the message it must print. Each call
runs in-process through :func:`gradsched.cli.main` under an alarm (a hang fails the test
instead of stalling it); it must exit with status 2, print no traceback, end its stderr
with one ``error:`` line holding the message, and leave no output, partial folder or
staging folder behind. All inputs here are SYNTHETIC (made by the fixtures below).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import ConfigError, InputError
from gradsched.plan import Bucket, Plan
from gradsched.replay.engine import ReplayOptions
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

HANG_LIMIT_S = 30  # one call; the whole file runs in well under a minute


# ------------------------------------------------------------------------------- fixtures
SYNTHETIC_NCCL = """\
# SYNTHETIC nccl-tests log written for the robustness tests (not measured)
# source: SYNTHETIC test fixture
# setup: none
# Collective test starting: all_reduce_perf
#  Rank  0 Group  0 Pid  101 on  hostA device  0 [0000:04:00] none
#  Rank  1 Group  0 Pid  201 on  hostB device  0 [0000:04:00] none
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.00    0.00    0.00      0    11.00    0.00    0.00      0
          16             4     float     sum      -1    12.00    0.00    0.00      0    13.00    0.00    0.00      0
"""


def _bcaffe_log(rows: list[tuple[int, int, float, float]]) -> str:
    """A SYNTHETIC B-Caffe per-blob dump (param_id, size, compute_us, comm_us)."""
    return "".join(f"I0101 00:00:00.000000  1 distributed.cpp:112] [{i}, {s}, {c}, {m}]\n"
                   for i, s, c, m in rows)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of SYNTHETIC inputs, good and bad."""
    d = tmp_path_factory.mktemp("robust")
    synthetic_compute_trace(8).save(d / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(d / "m.csv")
    synthetic_comm_trace([4096]).save(d / "one.csv")  # one message size: too small to fit
    good = (d / "c.csv").read_text(encoding="utf-8").splitlines()
    meta = (d / "c.meta.json").read_text(encoding="utf-8")

    def compute_variant(name: str, field: str, value: str) -> None:
        header = good[0].split(",")
        cells = good[1].split(",")
        cells[header.index(field)] = value
        (d / f"{name}.csv").write_text("\n".join([good[0], ",".join(cells), *good[2:]]) + "\n",
                                       encoding="utf-8")
        (d / f"{name}.meta.json").write_text(meta, encoding="utf-8")

    compute_variant("huge_bytes", "bytes", "8000000000000000000")
    compute_variant("int_overflow", "numel", "99999999999999999999999")
    compute_variant("huge_time", "backward_s", "1e300")
    compute_variant("nan_time", "forward_s", "nan")
    compute_variant("neg_time", "backward_s", "-1")
    (d / "latin1.csv").write_bytes(good[0].encode() + b"\n" + "caf\xe9".encode("latin-1")
                                   + b",0,1,4,0.1,0.1,0\n")
    (d / "latin1.meta.json").write_text(meta, encoding="utf-8")
    (d / "badmeta.csv").write_text("\n".join(good) + "\n", encoding="utf-8")
    (d / "badmeta.meta.json").write_bytes(b'{"kind": "compute", "model": "\xe9"}')
    (d / "arraymeta.csv").write_text("\n".join(good) + "\n", encoding="utf-8")
    (d / "arraymeta.meta.json").write_text("[1, 2]", encoding="utf-8")
    (d / "empty.csv").write_text("", encoding="utf-8")
    (d / "array.json").write_text("[1, 2, 3]", encoding="utf-8")
    (d / "string.json").write_text('"model"', encoding="utf-8")
    (d / "latin1.json").write_bytes(b'{"kind": "\xe9"}')
    (d / "broken.json").write_text('{"a": 1,\n', encoding="utf-8")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (d / "model.txt").write_text("not a model", encoding="utf-8")
    for name, values in {
        "inter_low": {"compute_slowdown": 0.5, "comm_slowdown": 1.0},
        "inter_neg_cpu": {"compute_slowdown": 1.0, "comm_slowdown": 1.0,
                          "collective_cpu_s": -1e-3},
        "inter_huge": {"compute_slowdown": 1e300, "comm_slowdown": 1.0},
        "inter_text": {"compute_slowdown": "fast", "comm_slowdown": 1.0},
    }.items():
        (d / f"{name}.json").write_text(json.dumps(values), encoding="utf-8")
    names = [f"layer{i}.weight" for i in range(8)]
    plans = {
        "chunks_1e9": {"chunks": 10**9},
        "chunks_float": {"chunks": 1e9},
        "chunks_zero": {"chunks": 0},
        "chunks_bool": {"chunks": True},
        "release_nan": {"release_s": "NaN"},
        "release_huge": {"release_s": 1e300},
        "priority_big": {"priority": 2**70},
    }
    for name, extra in plans.items():
        plan = {"format": "gradsched.plan", "format_version": 2, "algorithm": "synthetic",
                "buckets": [{"tensors": names, "collective": "all_reduce", **extra}]}
        text = json.dumps(plan).replace('"NaN"', "NaN")
        (d / f"plan_{name}.json").write_text(text, encoding="utf-8")
    heavy = {"format": "gradsched.plan", "format_version": 2, "algorithm": "synthetic",
             "buckets": [{"tensors": [n], "chunks": 60_000} for n in names[:2]]}
    (d / "plan_heavy.json").write_text(json.dumps(heavy), encoding="utf-8")
    other = {"format": "gradsched.plan", "format_version": 2, "algorithm": "synthetic",
             "buckets": [{"tensors": names}]}  # the synthetic trace's names, not tiny-mlp's
    (d / "plan_other_model.json").write_text(json.dumps(other), encoding="utf-8")
    (d / "plan_notobject.json").write_text('["buckets"]', encoding="utf-8")
    (d / "plan_buckets.json").write_text(json.dumps(
        {"format": "gradsched.plan", "format_version": 2, "buckets": {"a": 1}}),
        encoding="utf-8")
    (d / "nccl.txt").write_text(SYNTHETIC_NCCL, encoding="utf-8")
    (d / "nccl_slow.txt").write_text(SYNTHETIC_NCCL.replace(
        "    12.00    0.00    0.00      0    13.00", "    1e300    0.00    0.00      0    13.00"),
        encoding="utf-8")
    (d / "nccl_huge.txt").write_text(SYNTHETIC_NCCL.replace(
        "          16             4     float", "9999999999999999999999             4     float"),
        encoding="utf-8")
    (d / "nccl_latin1.txt").write_bytes(SYNTHETIC_NCCL.encode() + b"# caf\xe9\n")
    (d / "bcaffe.log").write_text(_bcaffe_log([(0, 100, 10.0, 5.0), (1, 10, 10.0, 4.0),
                                               (2, 300, 20.0, 9.0), (3, 20, 20.0, 3.0)]),
                                  encoding="utf-8")
    (d / "bcaffe_bad.log").write_text(_bcaffe_log([(0, 100, 10.0, 5.0), (1, 10, 99.0, 4.0)]),
                                      encoding="utf-8")
    (d / "manifest_partial.yaml").write_text(
        "version: 1\nfiles:\n"
        "  - file: nccl.txt\n    importer: nccl-tests\n    out: comm/first.csv\n"
        "    args: {source: SYNTHETIC, hardware: none}\n"
        "  - file: missing.txt\n    importer: nccl-tests\n    out: comm/second.csv\n"
        "    args: {source: SYNTHETIC, hardware: none}\n", encoding="utf-8")
    (d / "manifest_latin1.yaml").write_bytes(b"version: 1\nfiles: [caf\xe9]\n")
    (d / "kineto_array.json").write_text("[1, 2]", encoding="utf-8")
    (d / "a_file").write_text("a file, not a folder", encoding="utf-8")
    for name in ("unreadable.json", "unreadable.csv", "unreadable.txt", "unreadable.yaml"):
        # open() works but read() fails with EIO, even for root (chmod 000 would not)
        if Path("/proc/self/mem").exists():
            (d / name).symlink_to("/proc/self/mem")
    ab = {"collective": "all_reduce", "world_size": 4, "alpha_s": 1e-4, "beta_s_per_byte": 1e-9}
    ip = {"collective": "all_reduce", "world_size": 4, "bytes": [4, 4096],
          "time_s": [1e-4, 2e-4]}
    models = {
        "ab_huge_alpha": ("alpha-beta-series", {**ab, "alpha_s": 1e300}),
        "ab_string": ("alpha-beta-series", {**ab, "alpha_s": "1e-4"}),
        "ab_missing": ("alpha-beta-series", {"collective": "all_reduce", "world_size": 4}),
        "ab_ranks": ("alpha-beta-series", {**ab, "world_size": 2**80}),
        "ip_one": ("interp", {**ip, "bytes": [4096], "time_s": [1e-4]}),
        "ip_huge_bytes": ("interp", {**ip, "bytes": [4, 8e30]}),
        "ip_null": ("interp", {**ip, "time_s": [1e-4, None]}),
    }
    for name, (kind, series) in models.items():
        (d / f"{name}.json").write_text(json.dumps({"kind": kind, "series": [series]}),
                                        encoding="utf-8")
    (d / "list.yaml").write_text("[1, 2]\n", encoding="utf-8")
    (d / "bad.yaml").write_text("reexec: {cases: [\n", encoding="utf-8")
    (d / "sailor_array.json").write_text("[]", encoding="utf-8")
    return d


# ---------------------------------------------------------------------------------- table
@dataclass(frozen=True)
class Case:
    """One malformed input: its defect class, the command line ({d}: the fixture folder),
    a piece of the expected error message, and outputs that must not exist afterwards."""

    kind: str
    argv: str
    message: str
    absent: tuple[str, ...] = ()


COMPUTE = "--compute {d}/c.csv --comm {d}/m.csv"
REPLAY = f"replay {COMPUTE} -o {{d}}/out.csv"
AB = "--comm alpha-beta:alpha=1e-5,beta=1e-9 --world-size 4"
UNWRITABLE = "{d}/a_file/out.csv"  # below a file: cannot be created, even as root
RUN = "run --baseline ddp --model tiny-mlp --batch-size 2 --world-size 2"

CASES: list[Case] = [
    # --- non-finite / out-of-range numeric options (the two hangs among them) ---
    Case("nan-option", f"{REPLAY} --compute-slowdown nan", "not a finite number"),
    Case("nan-option", f"{REPLAY} --algorithms dear --pack-s-per-byte nan",
         "not a finite number"),
    Case("nan-option", f"{REPLAY} --algorithms bytescheduler --pack-s-per-byte nan",
         "not a finite number"),
    Case("nan-option", f"{REPLAY} --comm-slowdown inf", "not a finite number"),
    Case("nan-option", f"{REPLAY} --collective-cpu-s nan", "not a finite number"),
    Case("range-option", f"{REPLAY} --collective-cpu-s 1e300", "out of range"),
    Case("range-option", f"{REPLAY} --compute-slowdown 0.5", "out of range"),
    Case("range-option", f"{REPLAY} --pack-s-per-byte -1", "out of range"),
    Case("range-option", f"{REPLAY} --replay-iters 100000000", "out of range"),
    Case("range-option", f"{REPLAY} --replay-iters 1", "out of range"),
    Case("range-option", f"{REPLAY} --channels 0", "out of range"),
    Case("range-option", f"{REPLAY} --world-size 0", "out of range"),
    Case("range-option", f"{REPLAY} --world-size 99999999999999999999", "out of range"),
    Case("range-option", f"{REPLAY} --forward-ratio nan", "not a finite number"),
    Case("range-option", f"plan {COMPUTE} --algorithm ddp --world-size -3 -o {{d}}/p.json",
         "out of range", ("p.json",)),
    Case("range-option", f"replay --compute {{d}}/c.csv {AB} -o {{d}}/out.csv "
         "--replay-iters abc", "not an integer"),
    Case("range-option", "replay --compute {d}/c.csv --comm alpha-beta:alpha=nan,beta=1e-9 "
         "--world-size 4 -o {d}/out.csv", "alpha must be a finite number"),
    Case("range-option", "fit {d}/m.csv --gamma nan", "not a finite number"),
    Case("range-option", "fit {d}/m.csv --folds 0", "must be positive"),
    Case("range-option", "fit {d}/m.csv --cross-world-size --fit-on 0", "world sizes"),
    Case("range-option", f"{RUN} --bucket-cap-mb nan -o {{d}}/r.csv", "not a finite number"),
    Case("range-option", f"{RUN} --bucket-cap-mb inf -o {{d}}/r.csv", "not a finite number"),
    Case("range-option", f"{RUN} --timeout-s 0 -o {{d}}/r.csv", "out of range"),
    Case("range-option", f"{RUN} --iters 0 -o {{d}}/r.csv", "out of range"),
    Case("range-option", "run --baseline ddp --model tiny-mlp --batch-size 0 --world-size 2 "
         "-o {d}/r.csv", "must be positive"),
    Case("range-option", "bench collectives --world-size 0 -o {d}/b.csv", "world sizes"),
    Case("range-option", "bench collectives --max-bytes 99999999999G -o {d}/b.csv",
         "1 PiB"),
    Case("range-option", "bench collectives --target-s nan -o {d}/b.csv",
         "not a finite number"),
    Case("range-option", "bench collectives --deadline-s -5 -o {d}/b.csv", "out of range"),
    Case("range-option", "bench collectives-fit {d}/m.csv --gamma nan -o {d}/f.json",
         "--gamma"),
    Case("range-option", "compress train --lr nan -o {d}/ct", "not a finite number"),
    Case("range-option", "compress train --momentum 2 -o {d}/ct", "out of range"),
    Case("range-option", "compress train --steps 0 -o {d}/ct", "out of range"),
    Case("range-option", "compress profile --sizes 99999999999G -o {d}/cp.csv", "1 PiB"),
    Case("range-option", "compress profile --densities nan -o {d}/cp.csv", "density"),
    Case("range-option", "reexec interference --comm-bytes 1e400 -o {d}/i.json", "size"),
    Case("range-option", "reexec interference --world-size 0 -o {d}/i.json", "out of range"),
    Case("range-option", "reexec run --iters -1 --list", "out of range"),
    Case("range-option", "capture iteration --model tiny-mlp --batch-size 2 "
         "--bucket-cap-mb nan -o {d}/cap", "finite positive"),
    Case("range-option", "capture iteration --model tiny-mlp --batch-size 2 "
         "--deadline-s inf -o {d}/cap", "not a finite number"),
    Case("range-option", "import nccl-tests {d}/nccl.txt -o {d}/n.csv "
         "--error-tolerance nan", "not a finite number", ("n.csv",)),
    Case("range-option", "import kineto {d}/kineto_array.json --compute-out {d}/k.csv "
         "--rank -1", "out of range"),
    Case("range-option", "advise --compute {d}/c.csv --comm {d}/m.csv --margin-pct nan",
         "not a finite number"),
    Case("range-option", "cluster --world-size abc -- true", "not an integer"),
    Case("range-option", "cluster --master-port 80x -- true", "not an integer"),
    # --- unknown names ---
    Case("unknown-name", f"{REPLAY} --knob dpp.bucket_cap_mb=50", "unknown planner 'dpp'"),
    Case("unknown-name", f"{REPLAY} --algorithms ddp --knob ddp.bucket_cap_mbx=50",
         "has no knob"),
    Case("unknown-name", f"{REPLAY} --knob ddp.=5", "knob name is empty"),
    Case("unknown-name", f"{REPLAY} --algorithms nope", "unknown algorithm"),
    Case("unknown-name", f"plan {COMPUTE} --algorithm nope -o {{d}}/p.json", "nope",
         ("p.json",)),
    Case("range-knob", f"{REPLAY} --algorithms ddp --knob ddp.bucket_cap_mb=1e300",
         "magnitude"),
    Case("range-knob", f"{REPLAY} --algorithms ddp --knob ddp.bucket_cap_mb=nan",
         "finite"),
    Case("range-knob", f"{REPLAY} --algorithms dear --knob dear.bo_iters=1000000000",
         "out of range [1, 10000]"),
    Case("range-knob", f"{REPLAY} --algorithms search --knob search.bo_iters=0",
         "out of range [1, 10000]"),
    Case("range-knob", f"{REPLAY} --algorithms bytescheduler "
         "--knob bytescheduler.tune_iters=100000000", "out of range [1, 10000]"),
    # --- a comm trace too small to fit ---
    Case("too-small", "replay --compute {d}/c.csv --comm {d}/one.csv -o {d}/out.csv",
         "too small to fit"),
    Case("too-small", "fit {d}/one.csv", "at least 2 message sizes"),
    Case("too-small", "replay --compute {d}/c.csv --comm {d}/ip_one.json -o {d}/out.csv",
         "at least 2 sizes"),
    # --- fitted model JSON: shape and physical range ---
    Case("model-json", "replay --compute {d}/c.csv --comm {d}/ab_huge_alpha.json "
         "-o {d}/out.csv", "outside [0, 1e+06] s"),
    Case("model-json", "replay --compute {d}/c.csv --comm {d}/ab_string.json -o {d}/out.csv",
         "must be JSON numbers"),
    Case("model-json", "replay --compute {d}/c.csv --comm {d}/ab_missing.json -o {d}/out.csv",
         "KeyError: 'alpha_s'"),
    Case("model-json", "replay --compute {d}/c.csv --comm {d}/ab_ranks.json -o {d}/out.csv",
         "world_size must be an integer"),
    Case("model-json", "replay --compute {d}/c.csv --comm {d}/ip_huge_bytes.json "
         "-o {d}/out.csv", "beyond"),
    Case("model-json", "replay --compute {d}/c.csv --comm {d}/ip_null.json -o {d}/out.csv",
         "lists of numbers"),
    Case("model-json", "replay --compute {d}/c.csv --comm alpha-beta:alpha=1e300,beta=1e-9 "
         "--world-size 4 -o {d}/out.csv", "alpha must be a finite number in"),
    # --- out-of-range interference (was clamped) ---
    Case("interference", f"{REPLAY} --interference {{d}}/inter_low.json",
         "compute_slowdown"),
    Case("interference", f"{REPLAY} --interference {{d}}/inter_neg_cpu.json",
         "collective_cpu_s"),
    Case("interference", f"{REPLAY} --interference {{d}}/inter_huge.json", "out of range"),
    Case("interference", f"{REPLAY} --interference {{d}}/inter_text.json", "needs a number"),
    Case("interference", f"{REPLAY} --interference {{d}}/array.json", "must be an object"),
    # --- trace cells out of the physical range or the integer range ---
    Case("trace-range", f"replay --compute {{d}}/huge_bytes.csv {AB} -o {{d}}/out.csv",
         "beyond the physical range"),
    Case("trace-range", f"replay --compute {{d}}/int_overflow.csv {AB} -o {{d}}/out.csv",
         "beyond the physical range"),
    Case("trace-range", f"replay --compute {{d}}/huge_time.csv {AB} -o {{d}}/out.csv",
         "beyond the physical range"),
    Case("trace-range", f"replay --compute {{d}}/nan_time.csv {AB} -o {{d}}/out.csv",
         "not a finite number"),
    Case("trace-range", f"replay --compute {{d}}/neg_time.csv {AB} -o {{d}}/out.csv",
         "at least"),
    Case("trace-range", "traces validate {d}/huge_bytes.csv", "beyond the physical range"),
    Case("trace-range", "import nccl-tests {d}/nccl_slow.txt -o {d}/n.csv",
         "nccl_slow.txt, field 'time_s': imported row 2", ("n.csv",)),
    Case("trace-range", "import nccl-tests {d}/nccl_huge.txt -o {d}/n.csv",
         "nccl_huge.txt, field 'bytes': imported row 2", ("n.csv",)),
    # --- JSON shape and encoding ---
    Case("json-shape", "replay --compute {d}/c.csv --comm {d}/array.json -o {d}/out.csv",
         "must be an object, not an array"),
    Case("json-shape", "replay --compute {d}/c.csv --comm {d}/string.json -o {d}/out.csv",
         "not a string"),
    Case("json-shape", "replay --compute {d}/c.csv --comm {d}/broken.json -o {d}/out.csv",
         "not valid JSON"),
    Case("json-shape", "replay --compute {d}/c.csv --comm {d}/deep.json -o {d}/out.csv",
         "nested too deeply"),
    Case("json-shape", "replay --compute {d}/c.csv --comm {d}/model.txt -o {d}/out.csv",
         "expected a comm trace"),
    Case("json-shape", "traces validate {d}/arraymeta.csv", "must be an object"),
    Case("json-shape", "bench collectives-tune {d}/m.csv --fit {d}/array.json "
         "-o {d}/t.json", "must be an object", ("t.json",)),
    Case("json-shape", f"{RUN} --plan {{d}}/plan_notobject.json -o {{d}}/r.csv",
         "must be an object, not an array", ("r.csv",)),
    Case("json-shape", f"{RUN} --plan {{d}}/plan_buckets.json -o {{d}}/r.csv",
         "buckets must be a list", ("r.csv",)),
    Case("json-shape", "import kineto {d}/kineto_array.json -o {d}/kin", "is not an object",
         ("kin.iterations.csv",)),
    Case("json-shape", "import sailor {d}/sailor_array.json --model OPT-350 -o {d}/s.csv",
         "expected",
         ("s.csv",)),
    Case("encoding", f"replay --compute {{d}}/latin1.csv {AB} -o {{d}}/out.csv",
         "not UTF-8 text"),
    Case("encoding", "replay --compute {d}/c.csv --comm {d}/latin1.json -o {d}/out.csv",
         "not UTF-8 text"),
    Case("encoding", "traces validate {d}/badmeta.csv", "not UTF-8 text"),
    Case("encoding", "traces inventory {d}/badmeta.csv -o {d}/inv.csv", "not UTF-8 text",
         ("inv.csv",)),
    Case("encoding", "import nccl-tests {d}/nccl_latin1.txt -o {d}/n.csv", "UTF-8",
         ("n.csv",)),
    Case("encoding", "import manifest {d}/manifest_latin1.yaml --src {d} -o {d}/mlat",
         "not UTF-8 text", ("mlat",)),
    Case("empty", f"replay --compute {{d}}/empty.csv {AB} -o {{d}}/out.csv", "empty"),
    # --- file-system errors: missing, a folder, unreadable, unwritable ---
    Case("filesystem", f"replay --compute {{d}}/nope.csv {AB} -o {{d}}/out.csv",
         "file not found"),
    Case("filesystem", f"replay --compute {{d}} {AB} -o {{d}}/out.csv", "file not found"),
    Case("filesystem", f"replay {COMPUTE} -o {UNWRITABLE}", "is a file, not a folder"),
    Case("filesystem", f"replay {COMPUTE} -o {{d}}", "output is a folder"),
    Case("filesystem", f"replay {COMPUTE} -o {{d}}/out.csv --plans {{d}}/a_file",
         "existing file"),
    Case("filesystem", f"replay {COMPUTE} -o /proc/gradsched-robust/out.csv",
         "cannot create the output"),
    Case("filesystem", f"plan {COMPUTE} --algorithm ddp -o {UNWRITABLE}",
         "is a file, not a folder"),
    Case("filesystem", "fit {d}/m.csv -o /proc/gradsched-robust.json",
         "cannot create the output"),
    Case("filesystem", "traces inventory {d}/c.csv -o " + UNWRITABLE,
         "is a file, not a folder"),
    Case("filesystem", "import nccl-tests {d}/nccl.txt -o " + UNWRITABLE,
         "is a file, not a folder"),
    Case("filesystem", "import nccl-tests {d}/missing.txt -o {d}/n.csv", "file not found",
         ("n.csv",)),
    Case("filesystem", "reexec interference -o " + UNWRITABLE, "is a file, not a folder"),
    Case("filesystem", "reexec analyze --input {d}/missing.csv --stats {d}/st.csv",
         "missing.csv", ("st.csv",)),
    Case("filesystem", "compress report --input {d}/nope --figdir {d}/fd --tabdir {d}/td",
         "nope", ("fd", "td")),
    Case("filesystem", "report concat {d}/nope.csv -o {d}/cat.csv", "nope.csv",
         ("cat.csv",)),
    Case("filesystem", "report concat {d}/c.csv -o " + UNWRITABLE, "is a file"),
    Case("encoding", "report concat {d}/latin1.csv -o {d}/cat2.csv",
         "latin1.csv: input is not utf-8 text", ("cat2.csv",)),
    Case("encoding", "report table fits --input {d}/latin1.csv --tex {d}/t.tex --md {d}/t.md",
         "latin1.csv: input is not utf-8 text", ("t.tex", "t.md")),
    # a CSV that is not the one the command reads: the missing column and the file named
    Case("wrong-columns", "report table replay --input {d}/c.csv --tex {d}/t.tex --md {d}/t.md",
         "no column 'iteration_s'", ("t.tex", "t.md")),
    Case("wrong-columns", "report figure replay-vs-world-size --input {d}/c.csv -o {d}/f.pdf",
         "c.csv", ("f.pdf",)),
    Case("wrong-columns", "report figure gaps --input {d}/c.csv -o {d}/g.pdf",
         "is it the CSV this command reads", ("g.pdf",)),
    Case("unreadable", "replay --compute {d}/unreadable.csv --comm {d}/m.csv -o {d}/out.csv",
         "unreadable.csv: cannot read"),
    Case("unreadable", "replay --compute {d}/c.csv --comm {d}/unreadable.json -o {d}/out.csv",
         "unreadable.json: cannot read"),
    Case("unreadable", "replay --compute {d}/c.csv --comm {d}/unreadable.csv -o {d}/out.csv",
         "unreadable.csv: cannot read"),
    Case("unreadable", f"{REPLAY} --interference {{d}}/unreadable.json",
         "unreadable.json: cannot read"),
    Case("unreadable", "fit {d}/unreadable.csv", "unreadable.csv: cannot read"),
    Case("unreadable", "traces validate {d}/unreadable.csv", "cannot read"),
    Case("unreadable", f"{RUN} --plan {{d}}/unreadable.json -o {{d}}/r.csv", "cannot read",
         ("r.csv",)),
    Case("unreadable", "import nccl-tests {d}/unreadable.txt -o {d}/n.csv", "cannot read",
         ("n.csv",)),
    Case("unreadable", "import bcaffe {d}/unreadable.txt --world-size 2 "
         "-o {d}/bc3.csv", "cannot read", ("bc3.csv",)),
    Case("unreadable", "import kineto {d}/unreadable.json -o {d}/kin2", "cannot read"),
    Case("unreadable", "import manifest {d}/unreadable.yaml --src {d} -o {d}/mout2",
         "cannot read", ("mout2",)),
    Case("unreadable", "reexec run --config {d}/unreadable.yaml --list", "cannot read"),
    Case("unreadable", "reexec analyze --input {d}/unreadable.csv", "cannot read"),
    Case("json-shape", "reexec run --config {d}/list.yaml --list", "expected a mapping"),
    Case("json-shape", "reexec run --config {d}/bad.yaml --list", "not valid YAML"),
    Case("json-shape", "bench collectives-report {d}/m.csv --fit {d}/array.json --errors "
         "{d}/e.csv --figdir {d}/fd2 --tabdir {d}/td2", "must be an object"),
    Case("encoding", "reexec analyze --input {d}/latin1.csv", "not UTF-8 text"),
    Case("encoding", "reexec run --config {d}/latin1.json --list", "not UTF-8 text"),
    # --- nothing half done: a later step fails, no earlier output is left ---
    Case("partial", f"replay {COMPUTE} -o {{d}}/out.csv --algorithms wfbp,ddp --timeline "
         "{d}/tl --plans {d}/pl --knob ddp.bucket_cap_mb=abc", "not a valid float",
         ("out.csv", "tl", "pl")),
    Case("partial", f"replay {COMPUTE} -o {UNWRITABLE} --algorithms wfbp --plans {{d}}/pl2",
         "is a file", ("pl2",)),
    Case("partial", "fit {d}/m.csv --table {d}/fit.csv -o " + UNWRITABLE, "is a file",
         ("fit.csv",)),
    Case("partial", "import bcaffe {d}/bcaffe.log --world-size 2 --nodes 2 "
         "-o {d}/bc.csv --comm-out " + UNWRITABLE, "is a file", ("bc.csv", "bc.meta.json")),
    Case("partial", "import bcaffe {d}/bcaffe_bad.log --world-size 2 --nodes 2 "
         "-o {d}/bc2.csv --comm-out {d}/bc2comm.csv", "compute_us",
         ("bc2.csv", "bc2comm.csv")),
    Case("partial", "import manifest {d}/manifest_partial.yaml --src {d} -o {d}/mout",
         "file not found", ("mout",)),
    Case("partial", f"{RUN} -o {UNWRITABLE}", "is a file, not a folder"),
    Case("partial", f"{RUN} -o {{d}}/r.csv --profile {{d}}/a_file", "existing file",
         ("r.csv", "r.summary.csv")),
    Case("partial", "bench collectives -o " + UNWRITABLE, "is a file, not a folder"),
    Case("partial", "compress train -o " + UNWRITABLE, "is a file, not a folder"),
    Case("partial", "compress profile -o " + UNWRITABLE, "is a file, not a folder"),
    Case("partial", "capture compute --model tiny-mlp --batch-size 2 -o " + UNWRITABLE,
         "is a file, not a folder"),
    Case("partial", "capture iteration --model tiny-mlp --batch-size 2 -o {d}/a_file",
         "existing file"),
    # --- plans: bounded resources, checked fields ---
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_chunks_1e9.json -o {{d}}/r.csv",
         "chunks must be an integer in [1, 100000]", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_chunks_float.json -o {{d}}/r.csv",
         "chunks must be an integer", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_chunks_zero.json -o {{d}}/r.csv",
         "chunks must be an integer", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_chunks_bool.json -o {{d}}/r.csv",
         "chunks must be an integer", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_heavy.json -o {{d}}/r.csv",
         "collectives per iteration", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_release_nan.json -o {{d}}/r.csv",
         "release_s", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_release_huge.json -o {{d}}/r.csv",
         "release_s", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_priority_big.json -o {{d}}/r.csv",
         "priority", ("r.csv",)),
    Case("plan-bounds", f"{RUN} --plan {{d}}/plan_other_model.json -o {{d}}/r.csv",
         "that the model does not have", ("r.csv",)),
]


def _case_id(index: int, case: Case) -> str:
    return f"{index:03d}-{case.kind}-{'-'.join(case.argv.split()[:2])}"


class _Hang(Exception):
    pass


@pytest.fixture
def alarm() -> Iterator[None]:
    """Fail a call that runs longer than HANG_LIMIT_S (a hang) instead of stalling CI."""
    def _raise(signum: int, frame: object) -> None:
        raise _Hang(f"no answer within {HANG_LIMIT_S} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(HANG_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".staging" in p.name
                  or p.name.endswith(".tmp"))


def _params() -> list[object]:
    """The table as pytest parameters; rows that need Linux's /proc skip elsewhere."""
    no_proc = not Path("/proc/self/mem").exists()
    return [pytest.param(c, id=_case_id(i, c), marks=pytest.mark.skipif(
                no_proc and ("unreadable" in c.argv or "/proc/" in c.argv),
                reason="needs Linux /proc (an unreadable file even for root)"))
            for i, c in enumerate(CASES)]


@pytest.mark.parametrize("case", _params())
def test_malformed_input_is_a_clear_error(case: Case, work: Path, alarm: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = case.argv.replace("{d}", str(work)).split()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses the option itself
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 2, f"exit {code}, stderr: {err}"
    last = err.strip().splitlines()[-1]
    assert "error:" in last and case.message in last, last
    for name in case.absent:
        assert not (work / name).exists(), f"{name} left behind by a failed command"
    assert _leftovers(work) == []


def test_table_covers_every_entry_point_and_enough_inputs() -> None:
    """>= 60 malformed inputs, across every sub-command family."""
    assert len(CASES) >= 60
    commands = {c.argv.split()[0] for c in CASES}
    assert commands >= {"replay", "plan", "fit", "import", "traces", "report", "run",
                        "reexec", "bench", "compress", "capture", "advise"}
    assert len({c.argv for c in CASES}) == len(CASES)


# -------------------------------------------------------------- the two hangs, end to end
@pytest.mark.parametrize("extra", [["--compute-slowdown", "nan"],
                                   ["--algorithms", "dear", "--pack-s-per-byte", "nan"]])
def test_former_hangs_end_within_a_minute(work: Path, extra: list[str]) -> None:
    """The two command lines that spun at 100 % CPU: a separate process, killed at 60 s."""
    argv = [sys.executable, "-m", "gradsched", "replay", "--compute", str(work / "c.csv"),
            "--comm", str(work / "m.csv"), "-o", str(work / "hang.csv"), *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 2
    assert "not a finite number" in done.stderr and "Traceback" not in done.stderr
    assert not (work / "hang.csv").exists()


# ---------------------------------------------------------------- the shared layers, directly
@pytest.mark.parametrize("field,value", [
    ("compute_slowdown", math.nan), ("comm_slowdown", math.nan), ("pack_s_per_byte", math.nan),
    ("collective_cpu_s", math.nan), ("compute_slowdown", math.inf), ("pack_s_per_byte", -1.0),
    ("compute_slowdown", 0.5), ("iterations", 1), ("iterations", 10**9), ("channels", 0),
])
def test_replay_options_refuse_nan_and_out_of_range(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field if field != "iterations" else "iterations"):
        ReplayOptions(**{field: value})


def test_plan_memory_bound_is_checked_before_running() -> None:
    """chunks x tensors x ranks, with the executor's padding, against the machine's memory
    (a plan with ``chunks: 1e9`` once reached the OOM killer)."""
    plan = Plan("synthetic", (Bucket(("a",), chunks=1000), Bucket(("b",), "rs_ag", 10)))
    # all_reduce: ceil(1000/1000) x 1000 elements; rs_ag: ceil(1e6/(10 x 4)) x 4 x 10 + shards
    assert plan.buffer_bytes(4, 4, {"a": 1000, "b": 10**6}) == 4 * (1000 + 25_000 * 5 * 10)
    assert plan.buffer_bytes(4) == 4 * (1000 + 5 * 10)  # padding alone, sizes unknown
    plan.check_resources(world_size=4, memory_bytes=10**8, numel={"a": 1000, "b": 10**6})
    with pytest.raises(InputError, match="GiB of gradient buffers"):
        plan.check_resources(world_size=16, memory_bytes=10**9,
                             numel={"a": 10**8, "b": 10**6})


def test_staging_commits_all_or_nothing(tmp_path: Path) -> None:
    from gradsched.staging import Staging

    with Staging() as stage:
        a = stage.file(tmp_path / "x" / "a.csv")
        folder = stage.folder(tmp_path / "plans")
        a.write_text("a", encoding="utf-8")
        (folder / "p.json").write_text("{}", encoding="utf-8")
    assert (tmp_path / "x" / "a.csv").read_text(encoding="utf-8") == "a"
    assert (tmp_path / "plans" / "p.json").is_file()
    with pytest.raises(RuntimeError), Staging() as stage:
        stage.file(tmp_path / "b.csv").write_text("b", encoding="utf-8")
        raise RuntimeError("a later step fails")
    assert not (tmp_path / "b.csv").exists()
    assert _leftovers(tmp_path) == []


def test_unexpected_exception_is_one_line_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The last resort of cli.main: exit 1 and one line naming the exception; the
    traceback only on request (GRADSCHED_TRACEBACK=1)."""
    import gradsched.commands.traces as traces_cmd

    def boom(args: object) -> int:
        raise KeyError("trace")

    monkeypatch.setattr(traces_cmd, "_columns", boom)
    monkeypatch.delenv("GRADSCHED_TRACEBACK", raising=False)
    assert main(["traces", "columns"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "internal error: KeyError: 'trace'" in err
    monkeypatch.setenv("GRADSCHED_TRACEBACK", "1")
    with pytest.raises(KeyError):
        main(["traces", "columns"])
