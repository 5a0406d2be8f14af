"""Outputs byte for byte the same on every CPU: the computations whose outputs differed
between an AVX-512 machine and one without (the fit table, the collectives' formula fits and
errors, the figure drawn from them) run in subprocesses under numpy's and OpenBLAS's code
paths, and every output file must have the same bytes.

numpy picks its SIMD loops at import (``exp``, ``log``, ``log10``, ``power``: its AVX-512
and AVX2 loops differ in the last bit on a few per cent of inputs); ``NPY_DISABLE_CPU_FEATURES``
turns dispatch targets off (numpy's "CPU build options" and runtime dispatch documentation),
and ``OPENBLAS_CORETYPE`` picks OpenBLAS's kernel (its ``DYNAMIC_ARCH`` builds, as in the
numpy and scipy wheels). Each variant checks that it took effect (the features it turned off
read as off; OpenBLAS reports the core type asked for), so a variant cannot pass by running
the default path. On a CPU without AVX-512 the first variant runs the default numpy path
(nothing to turn off there), and the check is as strong as the CPU allows.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.costmodel.interp import InterpCurve
from gradsched.io import round_significant, write_csv_atomic
from tests.conftest import REPO

try:
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
except ImportError:  # numpy 1.x
    from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__

RUN = REPO / "tests" / "determinism_run.py"
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _available(names):
    return [n for n in names if __cpu_features__.get(n)]


def variants() -> dict[str, dict[str, str]]:
    """name -> environment. Three runs: the default paths; numpy without its AVX-512 targets
    (the AMD EPYC of the report) with OpenBLAS's Haswell kernel; numpy with no dispatch
    target at all (its baseline SIMD) with OpenBLAS's Sandybridge (x86-64) or ARMV8 kernel."""
    no_avx512 = _available(n for n in __cpu_dispatch__ if "AVX512" in n or n == "X86_V4")
    baseline = _available(__cpu_dispatch__)
    cores = ("Haswell", "Sandybridge") if X86 else ("ARMV8", "ARMV8")
    return {
        "default": {},
        "no-avx512": {"NPY_DISABLE_CPU_FEATURES": " ".join(no_avx512),
                      "OPENBLAS_CORETYPE": cores[0]},
        "numpy-baseline": {"NPY_DISABLE_CPU_FEATURES": " ".join(baseline),
                           "OPENBLAS_CORETYPE": cores[1]},
    }


def _run(name: str, extra: dict[str, str], root: Path) -> tuple[str, Path]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES",
                        "OPENBLAS_CORETYPE")}
    env.update({k: v for k, v in extra.items() if v})
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["OPENBLAS_NUM_THREADS"] = "1"
    out = root / name
    run = subprocess.run([sys.executable, str(RUN), str(out)], env=env, cwd=REPO,
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, f"{name}: {run.stderr[-2000:]}"
    return name, out


@pytest.mark.slow
def test_outputs_are_the_same_bytes_under_numpy_and_openblas_code_paths(tmp_path):
    runs = variants()
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(pool.map(lambda item: _run(item[0], item[1], tmp_path), runs.items()))
    # each variant ran what it asked for
    for name, extra in runs.items():
        state = json.loads((done[name] / "state.json").read_text())
        for feature in extra.get("NPY_DISABLE_CPU_FEATURES", "").split():
            assert not state["cpu_features"][feature], f"{name}: {feature} still on"
        if extra.get("OPENBLAS_CORETYPE"):
            assert [c.lower() for c in state["blas"]] == [extra["OPENBLAS_CORETYPE"].lower()]
    files = sorted(p.name for p in done["default"].iterdir() if p.name != "state.json")
    assert len(files) == 8
    for name in runs:
        if name == "default":
            continue
        assert sorted(p.name for p in done[name].iterdir() if p.name != "state.json") == files
        differ = [f for f in files
                  if (done[name] / f).read_bytes() != (done["default"] / f).read_bytes()]
        assert not differ, f"{name} ({runs[name]}) wrote other bytes in: {', '.join(differ)}"


def test_round_significant_and_the_csv_writer_print_no_noise(tmp_path):
    assert round_significant(0.1 + 0.2, 9) == 0.3
    assert round_significant(np.array([6.682079950436148e-09, np.nan]), 6)[0] == 6.68208e-09
    # floats among text (an object column) are written with the same digits as a float column
    frame = pd.DataFrame({"a": [0.1 + 0.2, 1.0], "b": pd.Series([0.1 + 0.2, "x"], dtype=object)})
    write_csv_atomic(tmp_path / "t.csv", frame)
    assert (tmp_path / "t.csv").read_text() == "a,b\n0.3,0.3\n1,x\n"


def test_an_interpolation_is_exact_on_its_points():
    """exp(log t) is t only up to the last bit (which numpy's SIMD paths disagree on): on a
    measured size the curve returns the measured time itself."""
    rng = np.random.default_rng(3)
    m = np.cumsum(rng.integers(1, 1 << 20, 40)).astype(float)
    t = np.sort(rng.uniform(1e-6, 1e-2, 40))
    curve, pooled = InterpCurve.from_points(m, t)
    assert pooled == 0
    assert curve.times(m).tolist() == t.tolist()
    assert float(curve.times(np.array(m[7]))) == t[7]
