"""No control character read from a data file reaches the terminal (the "printing" family).

A trace cell, a sidecar string or a file name can hold an escape byte: printed raw it
recolours, retitles or clears the user's terminal. Every command prints through one
sanitiser (:mod:`gradsched.printable`, wrapped around stdout and stderr by
:func:`gradsched.cli.main`). This file walks the printing paths of the main commands with a
poisoned trace -- SYNTHETIC inputs made below, labelled as such -- and checks that nothing
but newline and tab among the control characters is printed; a planted regression (the
sanitiser switched off) must make the walk fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import gradsched.printable as printable_module
from gradsched.cli import main
from gradsched.printable import is_printable, printable
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

POISON = "\x1b]0;pwned\x07\x1b[2J\x9b\u202e"
"""An OSC title change, a screen clear, a C1 CSI and a right-to-left override."""

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SYNTHETIC traces whose names, backend cells and sidecar strings hold control
    characters (not measured)."""
    d = tmp_path_factory.mktemp("poison")
    synthetic_compute_trace(8).save(d / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(d / "m.csv")
    compute = (d / "c.csv").read_text(encoding="utf-8")
    (d / "pc.csv").write_text(compute.replace("\nlayer", f"\nlay{POISON}er"), encoding="utf-8")
    comm = (d / "m.csv").read_text(encoding="utf-8")
    (d / "pm.csv").write_text(comm.replace("gloo", f"gl{POISON}oo"), encoding="utf-8")
    (d / "cr.csv").write_text(compute.replace("\nlayer", "\nlay\rer", 1), encoding="utf-8")
    (d / "cr.meta.json").write_text((d / "c.meta.json").read_text(encoding="utf-8"),
                                    encoding="utf-8")
    for src, dst in (("c", "pc"), ("m", "pm")):
        meta = json.loads((d / f"{src}.meta.json").read_text(encoding="utf-8"))
        for key in ("source", "hardware", "model", "device"):
            if key in meta:
                meta[key] = f"{meta[key]}{POISON}"
        meta["notes"] = f"SYNTHETIC{POISON}"
        (d / f"{dst}.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return d


WALK = [
    "fit {d}/pm.csv -o {d}/f.json --table {d}/t.csv",
    "fit {d}/pm.csv --model alpha-beta",
    "replay --compute {d}/pc.csv --comm {d}/m.csv --world-size 4 -o {d}/r.csv",
    "replay --compute {d}/pc.csv --comm {d}/pm.csv --world-size 4 -o {d}/r2.csv",
    "plan --compute {d}/pc.csv --comm {d}/m.csv --world-size 4 --algorithm wfbp "
    "-o {d}/pl.json",
    "plan --compute {d}/pc.csv --comm {d}/m.csv --world-size 4 --algorithm ddp --emit ddp",
    "advise --compute {d}/pc.csv --comm {d}/m.csv --world-size 4",
    "advise --compute {d}/pc.csv --comm {d}/pm.csv --world-size 4",
    "traces inventory {d}/pc.csv {d}/pm.csv -o {d}/inv.csv",
    "traces validate {d}/pc.csv {d}/pm.csv",
    "report table fits --input {d}/t.csv --tex {d}/x.tex --md {d}/x.md",
    f"traces validate {{d}}/missing{POISON}.csv",
    "traces validate {d}/cr.csv",
    "replay --compute {d}/cr.csv --comm {d}/m.csv --world-size 4 -o {d}/r3.csv",
]


def _run(argv: str, d: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv.replace("{d}", str(d)).split(" "))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("argv", WALK, ids=[w.split(" {d}")[0].split(" --")[0] + f"-{i}"
                                            for i, w in enumerate(WALK)])
def test_no_control_character_reaches_stdout_or_stderr(
        argv: str, poisoned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed = _run(argv, poisoned, capsys)
    assert code in (0, 2), printed
    assert "Traceback" not in printed
    bad = CONTROL.findall(printed)
    assert not bad, f"{argv}: control characters {bad!r} printed:\n{printed}"


def test_the_walk_prints_the_poisoned_strings_escaped(
        poisoned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The data reaches the output (escaped), so the walk above really exercises it."""
    _, printed = _run(WALK[0], poisoned, capsys)
    assert printable(POISON) in printed


def test_a_planted_regression_is_caught(poisoned: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sanitiser switched off: the fit table prints the raw escape byte, and the
    check of the walk sees it."""
    monkeypatch.setattr(printable_module, "printable", lambda text: text)
    _, printed = _run(WALK[0], poisoned, capsys)
    assert CONTROL.findall(printed)


def test_printable_escapes_controls_and_keeps_layout() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("x\x1b[31my\r\x7f\x9b\u202e") == "x\\x1b[31my\\x0d\\x7f\\x9b\\u202e"
    assert is_printable("plain text, ünïcode") and not is_printable("\x1b")


def test_the_stream_escapes_every_write_path() -> None:
    """``write`` and ``writelines`` both go through the sanitiser (a ``writelines`` left to
    the wrapped stream would bypass it)."""
    import io

    from gradsched.printable import PrintableStream

    buffer = io.StringIO()
    stream = PrintableStream(buffer)
    stream.write("a\x1b")
    stream.writelines(["b\x07\n", "c\t"])
    assert buffer.getvalue() == "a\\x1bb\\x07\nc\t"
    assert stream.wrapped is buffer and stream.getvalue() == buffer.getvalue()
