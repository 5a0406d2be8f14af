"""Every numeric option of every command goes through the hardened types of
``gradsched.commands._args``: plain ASCII integers and numbers, finite, in range.

The parser tree of ``gradsched.cli`` is walked, so an option added later with a plain
``type=int`` or ``type=float`` (which take ``1_6``, ``１６`` and ``nan``) fails here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gradsched.cli import build_parser, main
from gradsched.commands._args import (
    HARDENED_TYPES,
    integer,
    parse_int,
    parse_real,
    positive_int,
    real,
    size,
)
from gradsched.errors import ConfigError
from gradsched.units import parse_size
from tests.robustness.cli_tree import options

SRC = Path(__file__).resolve().parents[2] / "src"

PROBES = ("16", "2", "1", "0.5", "1/16")
"""Values one of which every numeric option type accepts."""

BAD_NUMBERS = ("1_6", "１６", "١٦", "16\u0660", "nan", "NaN", "inf", "-inf", "1e999",
               "9" * 400, "0x10", "", "1 6")
"""Texts no numeric option may accept: underscores, non-ASCII digits (full-width,
Arabic-Indic), non-finite values, overflow, hexadecimal, empty, inner blanks."""


def _is_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, tuple | list) and bool(value) and all(map(_is_number, value))


def _numeric_type(kind: Callable[[str], object] | None) -> bool:
    """True when ``kind`` turns one of :data:`PROBES` into a number (or numbers)."""
    if kind is None or kind in (str, Path):
        return False
    for probe in PROBES:
        try:
            if _is_number(kind(probe)):
                return True
        except (argparse.ArgumentTypeError, ValueError, TypeError, ConfigError):
            continue
    return False


def unhardened(parser: argparse.ArgumentParser) -> list[str]:
    """Numeric options of ``parser`` that do not use a hardened type."""
    wrong = []
    for name, action in options(parser):
        kind = action.type
        if kind in (int, float):
            wrong.append(f"{name}: plain type={kind.__name__}")
        elif _numeric_type(kind) and getattr(kind, "__name__", "") not in HARDENED_TYPES:
            wrong.append(f"{name}: type {getattr(kind, '__name__', kind)!r} is not one of "
                         "gradsched.commands._args'")
        elif kind is None and action.nargs != 0 and _is_number(action.default):
            wrong.append(f"{name}: numeric default {action.default!r} but no type")
    return wrong


def numeric_options() -> list[tuple[str, argparse.Action]]:
    return [(name, action) for name, action in options(build_parser())
            if _numeric_type(action.type)]


NUMERIC = numeric_options()


# --------------------------------------------------------------------------- the tree


def test_every_numeric_option_uses_a_hardened_type() -> None:
    assert len(NUMERIC) >= 60  # the walk reaches every command's options
    assert unhardened(build_parser()) == []


def test_the_walk_finds_a_new_plain_int_option() -> None:
    """The check above can fail: options with ``type=int``, ``type=float``, a home-made
    numeric type, or a numeric default without a type are all reported."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    p = sub.add_parser("new")
    p.add_argument("--ranks", type=int)
    p.add_argument("--ratio", type=float)
    p.add_argument("--count", type=lambda s: int(s))
    p.add_argument("--budget", default=1.5)
    p.add_argument("--fine", type=integer(1, 10))
    found = unhardened(parser)
    assert [f.split(":")[0] for f in found] == ["new --ranks", "new --ratio", "new --count",
                                                "new --budget"]


@pytest.mark.parametrize("name,action", NUMERIC, ids=[n for n, _ in NUMERIC])
def test_numeric_option_refuses_non_ascii_and_non_finite(name: str,
                                                        action: argparse.Action) -> None:
    for text in BAD_NUMBERS:
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            action.type(text)


# --------------------------------------------------------------------------- the types


@pytest.mark.parametrize("text,value", [("16", 16), ("+3", 3), (" 7 ", 7), ("-2", -2)])
def test_parse_int_accepts_plain_ascii(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize("text", ["1_6", "１６", "١٦", "16.0", "1e3", "0x10", "", "+", "²"])
def test_parse_int_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_int(text)


@pytest.mark.parametrize("text,value", [("1", 1.0), ("0.5", 0.5), (".5", 0.5), ("1e-3", 1e-3),
                                        ("2.", 2.0), ("-1.5E+2", -150.0)])
def test_parse_real_accepts_plain_ascii(text: str, value: float) -> None:
    assert parse_real(text) == value


@pytest.mark.parametrize("text", ["1_0", "１.５", "0x1p3", "1e", "e3", "", "1,5"])
def test_parse_real_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_real(text)


@pytest.mark.parametrize("kind,text,needle", [
    (integer(1, 10), "11", "out of range"),
    (integer(1, 10), "0", "out of range"),
    (positive_int, "0", "must be positive"),
    (positive_int, str(2**63), "too large"),
    (real(0.0, 1.0), "1.5", "out of range"),
    (real(0.0, 1.0, low_open=True), "0", "out of range"),
    (real(0.0, 1.0), "nan", "not a finite"),
    (real(), "1e999", "not a finite"),
    (size(), "2048T", "expected bytes"),
    (size(), "2000000G", "beyond"),
    (size(4), "2", ">= 4"),
])
def test_out_of_range_is_refused_naming_the_range(kind: Callable[[str], object], text: str,
                                                  needle: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=needle):
        kind(text)


@pytest.mark.parametrize("text", ["１６K", "1_6M", "١٦"])
def test_sizes_are_ascii_too(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_size(text)


# --------------------------------------------------------------------------- end to end

E2E = [
    ["capture", "comm", "--world-size", "1_6", "-o", "x.csv"],
    ["capture", "comm", "--world-size", "１６", "-o", "x.csv"],
    ["capture", "comm", "--world-size", str(2**31), "-o", "x.csv"],
    ["capture", "comm", "--factor", "nan", "-o", "x.csv"],
    ["capture", "comm", "--time-budget-s", "inf", "-o", "x.csv"],
    ["capture", "comm", "--iters", "0", "-o", "x.csv"],
    ["capture", "comm", "--max-bytes", "１M", "-o", "x.csv"],
    ["capture", "iteration", "--model", "tiny-mlp", "--batch-size", "1_6", "-o", "x"],
    ["capture", "compute", "--model", "tiny-mlp", "--batch-size", "4", "--threads", "１",
     "-o", "x.csv"],
    ["run", "--model", "tiny-mlp", "--batch-size", "4", "--world-size", "2_0", "-o", "x.csv"],
    ["bench", "collectives", "--world-size", "2,3_0", "-o", "x.csv"],
    ["bench", "collectives", "--per-octave", "65", "-o", "x.csv"],
    ["compress", "train", "--seeds", "0,１", "-o", "x"],
    ["compress", "profile", "--densities", "1/1_6", "-o", "x.csv"],
    ["reexec", "interference", "--comm-bytes", "８M", "-o", "x.json"],
    ["advise", "--compute", "x.csv", "--caps", "1,nan"],
    ["study", "topology-replay", "--replay-iters", "1e1"],
    ["cluster", "--world-size", "２", "--", "true"],
]


@pytest.mark.parametrize("argv", E2E, ids=[" ".join(a[:4]) for a in E2E])
def test_bad_number_on_the_command_line_exits_2_with_one_line(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("gradsched") and "error: argument" in err[-1], err
    assert "Traceback" not in "\n".join(err)


@pytest.mark.parametrize("extra", [
    ["--factor", "1.0000001", "--max-bytes", "1G"],
    ["--factor", "1.000000001", "--min-bytes", "1", "--max-bytes", "1048576G"],
    # 100 sizes after skipping duplicates: validation passes, then 64 ranks are refused
    ["--factor", "1.0000000001", "--min-bytes", "1", "--max-bytes", "100",
     "--collectives", "all_reduce", "--world-size", "64"],
])
def test_capture_comm_validation_never_hangs(extra: list[str], tmp_path: Path) -> None:
    """A growth factor just above 1 once made the size enumeration run for hours; each
    combination now ends (refused, or the run fails at its deadline) within seconds."""
    out = tmp_path / "sub" / "x.csv"
    proc = subprocess.run([sys.executable, "-m", "gradsched", "capture", "comm", *extra,
                           "-o", str(out)], env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_geometric_sizes_skip_duplicates_in_one_step() -> None:
    from gradsched.capture.sweep_settings import geometric_sizes

    assert geometric_sizes(1, 100, 1.0000000001) == list(range(1, 101))
    assert geometric_sizes(4, 1 << 20, 2) == [4 << k for k in range(19)]
    with pytest.raises(ConfigError, match="measurement points"):
        geometric_sizes(1, 1 << 40, 1.0001)
    with pytest.raises(ConfigError, match="finite"):
        geometric_sizes(4, 64, float("nan"))


@pytest.mark.parametrize("value", ["1_6", "１６", "٣"])
def test_planner_knobs_typed_on_the_command_line_are_ascii(value: str) -> None:
    """``--knob ALG.NAME=VALUE`` reaches the planners as text: the same grammar applies."""
    from gradsched.planners import parse_knobs

    with pytest.raises(ConfigError, match="not a valid"):
        parse_knobs("ddp", {"bucket_cap_mb": value})


@pytest.mark.parametrize("rate", ["１gbit", "1_0mbit"])
def test_cluster_rates_are_ascii(rate: str) -> None:
    from gradsched.distributed.shaping import parse_rate

    with pytest.raises(ConfigError, match="rate"):
        parse_rate(rate)
