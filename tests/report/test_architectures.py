"""The table and macros of the hierarchical / parameter-server runs (synthetic JSON,
labelled; the committed data is checked to load)."""

from __future__ import annotations

import json

import pytest

from gradsched.errors import InputError
from gradsched.report import architectures as arch
from gradsched.report.architectures import architecture_macros


def _run(kind, rate, workers, median, pred, rnd=1):
    return {"algorithm": "ddp", "bandwidth": rate, "layout": "x", "median_s": median,
            "p10_s": median * 0.9, "p90_s": median * 1.1, "predicted_iteration_s": pred,
            "plan_file": f"paper/data/reexec/architectures/ddp-{kind}.plan.json",
            "workers": workers, "round": rnd}


RUNS = [  # SYNTHETIC
    _run("flat", "1gbit", 4, 5.0, 4.0, 1), _run("hierarchical", "1gbit", 4, 4.5, 3.8, 1),
    _run("hierarchical", "1gbit", 4, 4.0, 3.8, 2), _run("flat", "1gbit", 4, 4.4, 4.0, 2),
    _run("ps", "1gbit", 2, 3.0, 3.3), _run("flat", "1gbit", 2, 2.5, 3.0)]


def test_ratios_pair_rounds_and_predictions():
    r = arch.ratios(RUNS).set_index("ratio")
    hier = r.loc["hierarchical/flat"]
    assert hier["measured"] == pytest.approx((4.5 / 5.0 + 4.0 / 4.4) / 2)
    assert hier["predicted"] == pytest.approx(3.8 / 4.0)
    assert r.loc["ps/flat", "measured"] == pytest.approx(3.0 / 2.5)


def test_table_and_macros():
    table, align = arch.architecture_table(RUNS)
    assert len(table) == 6 and len(align) == 6
    assert table.iloc[0].tolist()[-1] == "-20.0"
    m = architecture_macros(RUNS)
    assert m["ArchPsFlatOnegbitMeas"] == "1.20" and m["ArchHierFlatOneZeroZerombitMeas"] == "n/a"
    assert m["ArchErrMax"] == "20" and m["ArchNumRuns"] == "6"


def test_bad_input_names_the_field(tmp_path):
    path = tmp_path / "m.json"
    bad = dict(RUNS[0], median_s=float("nan"))
    path.write_text(json.dumps({"measured": [bad]}))
    with pytest.raises(InputError, match="median_s"):
        arch.load_runs(path)
    path.write_text(json.dumps({"measured": []}))
    with pytest.raises(InputError, match="non-empty"):
        arch.load_runs(path)


def test_committed_data_loads(repo):
    runs = arch.load_runs(repo / "paper/data/reexec/architectures/measured.json")
    kinds = {arch.kind_of(r) for r in runs}
    assert kinds == {"flat", "hierarchical", "ps"}
