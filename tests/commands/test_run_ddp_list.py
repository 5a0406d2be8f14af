"""``gradsched run --baseline ddp`` with a per-bucket ``bucket_cap_mb_list``: one real
2-rank gloo loopback launch of the tiny MLP whose caps come from a contiguous plan
(``--ddp-caps-from``), checking that DDP rebuilt the plan's buckets; the other tests check
the argument errors, which need no launch.

The compute trace here is SYNTHETIC (the tiny MLP's real tensor names and sizes, made-up
times): ``ddp_caps`` reads only its gradient-ready order and sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

from gradsched.cli import main
from gradsched.commands.run import summary_path
from gradsched.plan import Bucket, Plan
from gradsched.planners.ddp_caps import rebuilt_groups
from gradsched.runtime.runners import buckets_match, parse_bucket_indices
from gradsched.traces.bundle import ComputeTrace

MODEL = "tiny-mlp"
BASE = ["--model", MODEL, "--batch-size", "4", "--world-size", "2", "--backend", "gloo"]


def _params() -> list[tuple[str, int]]:
    from gradsched.workloads import build_model

    return [(n, p.numel()) for n, p in build_model(MODEL, 4).model.named_parameters()]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A SYNTHETIC trace of the tiny MLP, a contiguous 2-bucket plan and a per-layer one."""
    folder = tmp_path_factory.mktemp("ddp-list")
    params = _params()
    n = len(params)
    frame = pd.DataFrame({
        "name": [p for p, _ in params], "layer": [int(p.split(".")[0]) for p, _ in params],
        "numel": [k for _, k in params], "bytes": [4 * k for _, k in params],
        "forward_s": [1e-4] * n, "backward_s": [2e-4] * n, "ready_order": list(range(n))[::-1]})
    meta = {"kind": "compute", "model": MODEL, "batch_size": 4, "device": "none",
            "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
            "iterations": None, "date": "2026-11-26",
            "source": "SYNTHETIC test fixture, not measured"}
    ComputeTrace.from_frame(frame, meta).save(folder / "trace.csv")
    ready = [p for p, _ in params][::-1]
    # layers 4 and 2 in one bucket, layer 0 in the other (boundaries between layers, so
    # the order of weight and bias inside a layer does not matter)
    Plan("contiguous_optimum", (Bucket(tuple(ready[:4])), Bucket(tuple(ready[4:])))).save(
        folder / "contig.json")
    Plan("dear", (Bucket(tuple(ready[:3]), "rs_ag", chunks=2), Bucket(tuple(ready[3:]), "rs_ag")),
         update="per_layer").save(folder / "dear.json")
    return {"trace": folder / "trace.csv", "contig": folder / "contig.json",
            "dear": folder / "dear.json", "folder": folder}


def test_caps_from_plan_rebuild_the_plans_buckets(inputs):
    """Real run: 2 gloo ranks; DDP's rebuilt buckets are the plan's."""
    out = inputs["folder"] / "measured.csv"
    code = main(["run", "--baseline", "ddp", "--ddp-caps-from", str(inputs["contig"]),
                 "--compute", str(inputs["trace"]), "--bucket-cap-mb-list", "0.001",
                 *BASE, "--iters", "2", "--warmup", "1", "--timeout-s", "60", "-o", str(out)])
    assert code == 0
    summary = pd.read_csv(summary_path(out)).set_index("plan")
    assert set(summary["algorithm"]) == {"ddp-list"}
    row = summary.loc[f"ddp-caps-from={inputs['contig']}"]
    assert row["ddp_buckets"] == 2
    assert bool(row["ddp_buckets_match"]) is True
    # a 1 KiB cap: torch's closing rule (mirrored by rebuilt_groups) pairs each layer's
    # small bias with its weight; no plan to compare with
    tiny = summary.loc["bucket_cap_mb_list=0.001"]
    sizes = [4 * k for _, k in _params()][::-1]
    assert tiny["ddp_buckets"] == len(rebuilt_groups(sizes, [0.001])) == 3
    assert pd.isna(tiny["ddp_buckets_match"])


def test_bad_list_entry_names_the_option(tmp_path, capsys):
    for bad in ("1,-2", "1,x", "0", ",", "1,inf"):
        with pytest.raises(SystemExit) as exc:  # argparse's usage error
            main(["run", "--baseline", "ddp", "--bucket-cap-mb-list", bad, *BASE,
                  "-o", str(tmp_path / "x.csv")])
        assert exc.value.code == 2
        assert "argument --bucket-cap-mb-list: " in capsys.readouterr().err


def test_per_layer_plan_is_refused_naming_the_property(inputs, tmp_path, capsys):
    code = main(["run", "--baseline", "ddp", "--ddp-caps-from", str(inputs["dear"]),
                 "--compute", str(inputs["trace"]), *BASE, "-o", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert code != 0
    assert "bucket_cap_mb_list" in err and "update" in err and "dear.json" in err
    assert not (tmp_path / "x.csv").exists()


def test_list_run_needs_warmup(inputs, tmp_path, capsys):
    code = main(["run", "--baseline", "ddp", "--bucket-cap-mb-list", "1,2", *BASE,
                 "--warmup", "0", "-o", str(tmp_path / "x.csv")])
    assert code == 2
    assert "--warmup" in capsys.readouterr().err


def test_caps_from_needs_compute_and_baseline(inputs, tmp_path, capsys):
    code = main(["run", "--baseline", "ddp", "--ddp-caps-from", str(inputs["contig"]), *BASE,
                 "-o", str(tmp_path / "x.csv")])
    assert code == 2
    assert "--compute" in capsys.readouterr().err
    code = main(["run", "--bucket-cap-mb-list", "1,2", *BASE, "-o", str(tmp_path / "x.csv")])
    assert code == 2
    assert "--baseline ddp" in capsys.readouterr().err


def test_bucket_indices_parsing_and_match():
    names = ["a", "b", "c", "d"]
    assert parse_bucket_indices("3 2, 1 0", names) == [["d", "c"], ["b", "a"]]
    assert buckets_match([["d", "c"], ["b", "a"]], [["c", "d"], ["a", "b"]]) is True
    assert buckets_match([["d", "c", "b"], ["a"]], [["c", "d"], ["a", "b"]]) is False
    assert buckets_match(None, [["a"]]) is None
    json.dumps(parse_bucket_indices("0", names))  # plain lists: recorded in JSON as is


def test_a_mismatch_fails_the_command():
    """SYNTHETIC summary rows: a plan's caps that DDP did not rebuild as planned."""
    from dataclasses import asdict

    from gradsched.commands.run import check_rebuilt
    from gradsched.errors import InputError
    from gradsched.runtime.bench import RunItem
    from gradsched.runtime.rounds import Item

    ok = pd.DataFrame({"plan": ["a", "b"], "ddp_buckets": [2, 3],
                       "ddp_buckets_match": [True, None]})
    check_rebuilt(ok)
    bad = ok.assign(ddp_buckets_match=[True, False])
    with pytest.raises(InputError, match="differ from the plan's") as exc:
        check_rebuilt(bad)
    assert "'b'" in str(exc.value)
    item = RunItem("x", "ddp-list", bucket_cap_mb_list=[1.0, 2.0], expected_buckets=[["a"]])
    timed = item.item()  # what the ranks run: an item of the timing protocol
    assert (timed.kind, timed.bucket_cap_mb_list, timed.expected_buckets) == (
        "ddp-list", [1.0, 2.0], [["a"]])
    assert Item(**asdict(timed)) == timed  # rebuilt from the payload as it was
