"""The collectives report's frames (:mod:`gradsched.experiments.collectives`) on a
SYNTHETIC sweep made from the formulas themselves: the measured LP/RHD ratio equals the
formula's, and the fitted times follow the points."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradsched.costmodel.tuned import fit_formulas, fits_to_json, load_samples
from gradsched.experiments.collectives import collectives_frames, summary_rows
from gradsched.io import write_json_atomic
from tests.costmodel.test_tuned import SIZES, synthetic_trace


def test_frames_on_formula_data(tmp_path: Path) -> None:
    b = synthetic_trace(tmp_path / "b.csv", params=(1e-4, 8e-9, 2e-10), network="1gbit",
                        world_sizes=(2, 4), sizes=SIZES[::2])
    fits, _ = fit_formulas(load_samples([b]))
    rows = summary_rows(load_samples([b]), {f.network: f for f in fits})
    assert np.allclose(rows["lp_rhd_bw_measured"], rows["lp_rhd_bw_model"], rtol=0.05)
    fit_json = tmp_path / "fit.json"
    write_json_atomic(fit_json, fits_to_json(fits, ["b"]))
    frames = collectives_frames([b], fit_json)
    assert frames.networks == ("1gbit",) and frames.fitted == ("1gbit",)
    lp = frames.samples[frames.samples["algorithm"] == "lp"]
    assert np.allclose(lp["joint_time_s"], lp["time"], rtol=0.05)
    assert set(frames.at_large["world_size"]) == {2, 4}
    none = collectives_frames([b], _empty_fit(tmp_path))  # a fit JSON of other networks
    assert none.samples["fit_time_s"].isna().all() and none.fitted == ()
    assert none.summary["lp_rhd_bw_model"].isna().all()


def _empty_fit(tmp_path: Path) -> Path:
    path = tmp_path / "none.json"
    write_json_atomic(path, fits_to_json([], []))
    return path
