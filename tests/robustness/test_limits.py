"""Every documented limit is enforced where it is documented (the "limits" family).

Table-driven from ``docs/errors.md``: its "Ranges" table names, for each limit, the test
that tries it. This file checks that every row names a test that exists, and runs each
``probe[...]``: a command line just above the limit, which must end with one ``error:``
line and exit status 2, no traceback. All inputs are SYNTHETIC (made below).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gradsched.cli import main
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
HERE = Path(__file__).resolve().parent


def ranges_table() -> list[list[str]]:
    """The rows (cells) of docs/errors.md's "Ranges" table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Ranges", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[2:]]


def _compute_variant(d: Path, name: str, **cells: str) -> str:
    """A copy of the SYNTHETIC compute trace with cells of its first row replaced."""
    lines = (d / "c.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    row = lines[1].split(",")
    for key, value in cells.items():
        row[header.index(key)] = value
    (d / f"{name}.csv").write_text("\n".join([lines[0], ",".join(row), *lines[2:]]) + "\n",
                                   encoding="utf-8")
    (d / f"{name}.meta.json").write_text((d / "c.meta.json").read_text(encoding="utf-8"),
                                         encoding="utf-8")
    return str(d / f"{name}.csv")


def _write(d: Path, name: str, data: object) -> str:
    (d / name).write_text(data if isinstance(data, str) else json.dumps(data),
                          encoding="utf-8")
    return str(d / name)


ANALYTIC = "{kind: analytic, alpha_s: 1.0e-6, beta_s_per_byte: 1.0e-10, algorithm: ring}"
Probe = Callable[[Path], tuple[list[str], str, dict[str, str]]]


def _replay(d: Path, *extra: str) -> list[str]:
    return ["replay", "--compute", f"{d}/c.csv", "--comm", f"{d}/m.csv", "-o", f"{d}/o.csv",
            *extra]


def _kineto(d: Path, events: list[dict[str, object]]) -> str:
    return _write(d, "k.json", {"traceEvents": events})


def _x(name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": args}


PROBES: dict[str, Probe] = {
    "duration": lambda d: (["traces", "validate", _compute_variant(
        d, "dur", backward_s="1000001")], "backward_s", {}),
    "size": lambda d: (["traces", "validate", _compute_variant(
        d, "size", bytes=str(2**50 + 4), numel=str(2**48 + 1))], "bytes", {}),
    "world-size": lambda d: (_replay(d, "--world-size", str(2**20 + 1)), "world-size", {}),
    "topology": lambda d: (["replay", "--compute", f"{d}/c.csv", "--topology", _write(
        d, "t.yaml", f"nodes: 1024\nranks_per_node: 1025\nintra: {ANALYTIC}\n"
                     f"inter: {ANALYTIC}\n"), "-o", f"{d}/o.csv"], "world size limit", {}),
    "int-cell": lambda d: (["traces", "validate", _compute_variant(
        d, "int", layer=str(2**62 + 1))], "2**62", {}),
    "iterations": lambda d: (_replay(d, "--replay-iters", "10001"), "--replay-iters", {}),
    "slowdown": lambda d: (_replay(d, "--compute-slowdown", "1000001"), "out of range", {}),
    "collective-cpu": lambda d: (_replay(d, "--collective-cpu-s", "1000001"),
                                 "out of range", {}),
    "pack": lambda d: (_replay(d, "--algorithms", "dear", "--pack-s-per-byte", "1.5"),
                       "out of range", {}),
    "forward-ratio": lambda d: (_replay(d, "--forward-ratio", "10.5"), "out of range", {}),
    "knob": lambda d: (_replay(d, "--algorithms", "ddp", "--knob", "ddp.bucket_cap_mb=2e15"),
                       "1e+15", {}),
    "sharded-knob": lambda d: (["shard", "plan", "--compute", f"{d}/c.csv", "--comm",
                                f"{d}/m.csv", "--world-size", "4", "--algorithm", "fsdp2-cap",
                                "--knob", "unit_mb=1e308", "-o", f"{d}/sp.json"],
                               "1e+15", {}),
    "chunks": lambda d: (["run", "--baseline", "ddp", "--model", "tiny-mlp", "--batch-size",
                          "2", "--world-size", "2", "--plan", _write(d, "chunks.json", {
                              "format": "gradsched.plan", "format_version": 2,
                              "algorithm": "synthetic",
                              "buckets": [{"tensors": ["a"], "chunks": 100_001}]}),
                          "-o", f"{d}/r.csv"], "chunks", {}),
    "sharded-units": lambda d: (["shard", "run", "--model", "tiny-mlp", "--batch-size", "2",
                                 "--world-size", "2", "--plan", _write(d, "units.json", {
                                     "format": "gradsched.sharded_plan", "format_version": 1,
                                     "algorithm": "synthetic", "units": []})],
                                "units", {}),
    "comm-sizes": lambda d: (["replay", "--compute", f"{d}/c.csv", "--comm", f"{d}/one.csv",
                              "-o", f"{d}/o.csv"], "message size", {}),
    "cost-model": lambda d: (["replay", "--compute", f"{d}/c.csv", "--comm",
                              "alpha-beta:alpha=1000001,beta=1e-9", "--world-size", "4",
                              "-o", f"{d}/o.csv"], "alpha", {}),
    "input-bytes": lambda d: (["traces", "validate", f"{d}/c.csv"],
                              "GRADSCHED_MAX_INPUT_BYTES", {"GRADSCHED_MAX_INPUT_BYTES": "100"}),
    "input-env": lambda d: (["traces", "validate", f"{d}/c.csv"], "GRADSCHED_MAX_INPUT_BYTES",
                            {"GRADSCHED_MAX_INPUT_BYTES": "0"}),
    "kineto-duration": lambda d: (["import", "kineto", _kineto(d, [_x(
        "ProfilerStep#1", 0, 1.000001e12)]), "-o", f"{d}/k"], "dur", {}),
    "hook-free": lambda d: (["traces", "correct", f"{d}/hooked.csv", "-o", f"{d}/fixed.csv",
                             "--hook-free-summary", _write(d, "s.json", {"hooked": {
                                 "cuda_event_medians_s": {"forward": 1000001,
                                                          "backward": 1e-3}}})],
                            "forward", {}),
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("limits")
    synthetic_compute_trace(8).save(d / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(d / "m.csv")
    synthetic_comm_trace([4096]).save(d / "one.csv")
    hooked = synthetic_compute_trace(4)
    hooked.meta.update({"forward_nohooks_s": 1e-3, "backward_nohooks_s": 2e-3,
                        "capture_overhead": 0.5})
    hooked.save(d / "hooked.csv")
    return d


def test_every_documented_limit_names_a_test_that_exists() -> None:
    rows = ranges_table()
    assert len(rows) >= 20
    for cells in rows:
        assert len(cells) == 4, cells
        named = re.findall(r"`(test_\w+\.py)::(\w+)(?:\[([\w-]+)\])?`", cells[3])
        assert named, f"limit {cells[0]!r} names no test"
        for file, name, probe in named:
            source = (HERE / file).read_text(encoding="utf-8")
            assert f"def {name}(" in source or f"\n{name} = " in source \
                or (file == "test_limits.py" and name == "probe"), (file, name)
            if file == "test_limits.py":
                assert probe in PROBES, f"docs/errors.md names probe[{probe}], not defined"
    documented = {p for cells in rows
                  for p in re.findall(r"`test_limits\.py::probe\[([\w-]+)\]`", cells[3])}
    assert documented == set(PROBES), "a probe not listed in docs/errors.md, or the reverse"


@pytest.mark.parametrize("name", list(PROBES))
def test_probe(name: str, work: Path, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> None:
    """One command line just above the limit ``name``: one error line, exit 2."""
    argv, needle, env = PROBES[name](work)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 2, f"{name}: exit {code}: {err}"
    last = err.strip().splitlines()[-1]
    assert "error:" in last and needle in last, last


probe = test_probe
"""The name ``docs/errors.md`` uses for :func:`test_probe` (``probe[ID]``)."""
