"""Run the computations whose outputs differed between CPUs, writing them to a folder
(``python tests/determinism_run.py OUT``); :mod:`tests.test_determinism` runs it under
numpy's and OpenBLAS's code-path variants and compares the bytes.

What it runs: the fit table of two public comm traces (an interpolation exact on its points;
a noisy series whose points are pooled in log time), the collectives' formula fits and
per-size errors (least squares in log parameters: numpy's ``exp``/``log`` in every residual),
and the LP/RHD figure drawn from them (its dotted lines are the fitted formulas), and the
paper's headline case (the K80 GoogleNet trace) under its piecewise fit, replayed with the
contiguous optimum, whose program ties exactly between bucketings that differ only in where
their communication is priced (NNLS's last bits follow the BLAS kernel). Besides
them, ``state.json`` records what the process ran on (not compared): numpy's CPU features,
OpenBLAS's core type, and a digest of ``np.exp`` over fixed inputs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIT_TRACES = ("osu-abci-inter-anode-2-cpu", "nccl-cscs-alps-gh200-2node-allreduce")
HEADLINE = ("traces/comm/external/bcaffe-googlenet-tmp8comm.csv",
            "traces/compute/bcaffe/googlenet-tmp8comm.csv")
COLLECTIVE_TRACES = sorted(str(p) for p in (REPO / "traces/comm/collectives").glob("*.csv"))


def state() -> dict[str, object]:
    import numpy as np

    try:
        from numpy._core._multiarray_umath import __cpu_features__  # numpy >= 2
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__
    from threadpoolctl import threadpool_info

    x = np.linspace(-30.0, 30.0, 100_001)
    return {
        "cpu_features": {k: bool(v) for k, v in __cpu_features__.items()},
        "blas": sorted({str(i.get("architecture")) for i in threadpool_info()
                        if i.get("internal_api") == "openblas"}),
        "exp_digest": hashlib.sha256(np.exp(x).tobytes()).hexdigest(),
    }


def main(out: Path) -> None:
    from gradsched.cli import main as gradsched
    from gradsched.experiments.collectives import collectives_frames
    from gradsched.report.collectives import lp_rhd_ratio

    out.mkdir(parents=True, exist_ok=True)
    for stem in FIT_TRACES:
        trace = REPO / "traces/comm/external" / f"{stem}.csv"
        assert gradsched(["fit", str(trace), "--model", "all",
                          "--table", str(out / f"fit-{stem}.csv")]) == 0
    assert gradsched(["bench", "collectives-fit", *COLLECTIVE_TRACES, "--gamma", "auto",
                      "-o", str(out / "collectives-fit.json"),
                      "--errors", str(out / "collectives-errors.csv")]) == 0
    frames = collectives_frames(COLLECTIVE_TRACES, out / "collectives-fit.json")
    lp_rhd_ratio(frames.samples, frames.networks, frames.fitted,
                 out / "collectives-lp-rhd-ratio.pdf", out / "collectives-lp-rhd-ratio.png")
    comm, compute = (str(REPO / p) for p in HEADLINE)
    assert gradsched(["fit", comm, "--model", "piecewise", "-o", str(out / "headline.json")]) == 0
    assert gradsched(["replay", "--compute", compute, "--comm", str(out / "headline.json"),
                      "--algorithms", "contiguous_optimum", "-o", str(out / "headline.csv")]) == 0
    (out / "state.json").write_text(json.dumps(state(), indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
