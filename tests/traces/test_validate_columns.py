"""Trace cells checked a column at a time (``traces.validate._valid_column``) give the same
typed frame as the per-cell parse on the committed traces, and on random text the column
check accepts exactly the cells the per-cell parse accepts, with the same values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.errors import InputError
from gradsched.traces import validate
from gradsched.traces.columns import COMM_COLUMNS, COMPUTE_COLUMNS, Column

ROOT = Path(__file__).resolve().parents[2]
TRACES = [ROOT / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv",
          ROOT / "traces/compute/cpu/bert-base-s128-b4-cpu-fp32.csv",
          ROOT / "traces/comm/cpu/gloo-loopback-p2.csv"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_same_frame_as_the_per_cell_parse(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    columns = COMM_COLUMNS if "/comm/" in str(path) else COMPUTE_COLUMNS
    text = validate.read_csv_text(path)
    fast = validate.parse_frame(text, columns, path)
    monkeypatch.setattr(validate, "_valid_column", lambda cells, col: None)
    slow = validate.parse_frame(text, columns, path)
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)


_PIECES = ["0", "1", "7", "42", "+", "-", ".", "e", "E", "_", " ", "\t", "\n", "\x1f",
           "\uff11", "nan", "inf", "Infinity", "x", "1e400", "9" * 20]
_KINDS = [Column("c", "int", True, "bytes", "", "1"),
          Column("c", "int", True, "-", "", "1", minimum=0),
          Column("c", "float", True, "s", "", "1"),
          Column("c", "float", True, "-", "", "1", positive=True),
          Column("c", "bool", True, "-", "", "1"),
          Column("c", "str", True, "-", "", "a", choices=("a", "1"))]


def _per_cell(cell: str, col: Column) -> object:
    try:
        return validate._parse_cell(cell, col, "x.csv", 1)
    except InputError:
        return InputError


@pytest.mark.parametrize("col", _KINDS, ids=lambda c: f"{c.kind}-{c.minimum}-{c.positive}")
def test_column_check_accepts_what_the_cell_parse_accepts(col: Column) -> None:
    rng = np.random.default_rng(len(col.kind))
    for _ in range(3000):
        cell = "".join(rng.choice(_PIECES, size=int(rng.integers(0, 4))).tolist())
        want = _per_cell(cell, col)
        got = validate._valid_column([cell], col)
        if want is InputError:
            assert got is None, cell
        else:
            assert got is not None and len(got) == 1, cell
            value = got[0]
            assert type(value) is type(want) and (value == want or math.isnan(want)), cell
