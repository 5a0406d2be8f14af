"""``p2p`` (point-to-point, one message) as a comm-trace collective: validation, formulas, fits, the
wire floor and the model loaders. All traces here are synthetic (labelled in their meta)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gradsched.costmodel.base import DERIVED_FROM_ALL_REDUCE, load_comm_spec
from gradsched.costmodel.fit import build_model, fit_file
from gradsched.costmodel.formulas import algorithms_for, cost
from gradsched.errors import InputError
from gradsched.traces import CommTrace, meta_path

ALPHA, BETA = 50e-6, 1.0 / 117e6  # synthetic: 50 us start-up, ~1 Gbit/s
RATE_BPS = 125e6  # synthetic line rate, bytes/s
SIZES = [2**k for k in range(2, 27, 2)]  # 4 B .. 64 MiB


def _write(tmp_path: Path, times: list[float], world_size: int = 2,
           line_rate: float | None = RATE_BPS) -> Path:
    rows = ["collective,backend,algorithm,world_size,nodes,in_place,bytes,time_s"]
    rows += [f"p2p,gloo,default,{world_size},{world_size},0,{m},{t!r}"
             for m, t in zip(SIZES, times, strict=True)]
    path = tmp_path / "p2p.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    meta = {"kind": "comm", "source": "synthetic test input (not a measurement)",
            "hardware": "none", "statistic": "median"}
    if line_rate is not None:
        meta["line_rate_Bps"] = line_rate
    meta_path(path).write_text(json.dumps(meta), encoding="utf-8")
    return path


def _hockney() -> list[float]:
    return [ALPHA + BETA * m for m in SIZES]


def test_p2p_trace_loads_and_needs_two_ranks(tmp_path: Path) -> None:
    trace = CommTrace.load(_write(tmp_path, _hockney()))
    assert set(trace.frame["collective"]) == {"p2p"}
    bad = _write(tmp_path, _hockney(), world_size=3)
    with pytest.raises(InputError) as err:
        CommTrace.load(bad)
    assert err.value.field == "world_size" and err.value.row == 1
    assert str(bad) in str(err.value)


def test_p2p_formula_is_one_message() -> None:
    assert algorithms_for("p2p")
    m = np.array([0.0, 1e3, 1e6])
    for alg in algorithms_for("p2p"):
        np.testing.assert_allclose(cost("p2p", alg, m, 2, ALPHA, BETA), ALPHA + BETA * m)
    assert DERIVED_FROM_ALL_REDUCE["p2p"] == 1.0


@pytest.mark.parametrize("kind", ["alpha-beta", "piecewise", "interp"])
def test_p2p_fits_and_loads_as_comm_model(tmp_path: Path, kind: str) -> None:
    path = _write(tmp_path, _hockney())
    fits = fit_file(path, [kind], folds=3)
    assert [f.info["collective"] for f in fits] == ["p2p"]
    model = build_model(kind, fits)
    out = tmp_path / "model.json"
    model.save(out)
    loaded = load_comm_spec(str(out))
    m = float(2**20)
    assert loaded.time("p2p", m, 2) == pytest.approx(ALPHA + BETA * m, rel=0.02)
    # the trace itself is a --comm spec too (monotone interpolation)
    assert load_comm_spec(str(path)).time("p2p", m, 2) == pytest.approx(ALPHA + BETA * m,
                                                                         rel=0.02)


def test_p2p_faster_than_line_rate_is_flagged_and_floored(tmp_path: Path) -> None:
    """f_c = 1 for p2p: on a 2-rank link of rate r no message of m bytes beats m / r."""
    times = _hockney()
    burst = SIZES.index(2**16)
    times[burst] = ALPHA + 0.25 * SIZES[burst] / RATE_BPS  # a token-bucket burst: 4x the line
    path = _write(tmp_path, times)
    fits = fit_file(path, ["interp"], folds=3)
    assert any("faster than the sustained bandwidth" in n and "65536" in n
               for n in fits[0].notes)
    model = build_model("interp", fits)
    assert model.time("p2p", float(2**16), 2) >= 2**16 / RATE_BPS
    clean = fit_file(_write(tmp_path, _hockney()), ["interp"], folds=3)
    assert not any("faster than the sustained" in n for n in clean[0].notes)
