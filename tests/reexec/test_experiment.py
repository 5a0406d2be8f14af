"""``gradsched reexec``: cases -> plans -> measured runs -> predictions -> analysis.

Unit tests on synthetic inputs (labelled synthetic) plus two small real launches (2 gloo
ranks on loopback, the tiny MLP): the experiment end to end (run, collect, analyze with
figure and tables).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from gradsched import run_order
from gradsched.cli import main
from gradsched.errors import ConfigError, InputError
from gradsched.plan import Bucket, Plan
from gradsched.reexec import config, predict, run
from gradsched.replay.engine import replay
from gradsched.traces import ComputeTrace

ALPHA_BETA = "alpha-beta:alpha=1e-4,beta=1e-9"


def tiny_mlp_trace(path: Path) -> Path:
    """A SYNTHETIC compute trace with the tiny MLP's parameter names (not measured)."""
    from gradsched.workloads import build_model

    params = list(build_model("tiny-mlp", 4).model.named_parameters())
    n = len(params)
    frame = pd.DataFrame({
        "name": [name for name, _ in params],
        "layer": [i // 2 for i in range(n)],
        "numel": [p.numel() for _, p in params],
        "bytes": [4 * p.numel() for _, p in params],
        "forward_s": [1e-4 if i % 2 == 0 else 0.0 for i in range(n)],
        "backward_s": [2e-4] * n,
        "ready_order": list(range(n))[::-1],
        "update_s": [1e-5] * n,
    })
    meta = {"kind": "compute", "model": "tiny-mlp", "batch_size": 4, "device": "cpu",
            "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
            "iterations": None, "date": "2026-11-23",
            "source": "SYNTHETIC test fixture, not measured"}
    ComputeTrace.from_frame(frame, meta).save(path)
    return path


# ----------------------------------------------------------------------------- config
def test_cases_default_comm_and_names():
    cases = config.parse_cases([
        {"model": "resnet18", "batch_size": 16, "world_size": 2, "network": "tbf1gbit",
         "compute": "t.csv"}])
    assert cases[0].name == "resnet18-b16-p2-tbf1gbit"
    assert cases[0].comm == "traces/comm/cpu/gloo-tbf1gbit-p2.csv"
    assert cases[0].rate == "1gbit"


@pytest.mark.parametrize("entry, message", [
    ({"model": "m", "batch_size": 1, "world_size": 2, "network": "10gbit", "compute": "c.csv"},
     r"field 'cases\[0\].network'.*'10gbit' is not one of"),
    ({"model": "m", "batch_size": 1, "world_size": 1, "network": "loopback", "compute": "c.csv"},
     r"field 'cases\[0\].world_size'.*less than the minimum of 2"),
    ({"model": "m", "batch_size": 1, "world_size": 2, "network": "loopback"},
     r"field 'cases\[0\].compute': missing"),
    ({"model": "m", "batch_size": 1, "world_size": 2, "network": "loopback",
      "compute": "c.csv", "colour": 1}, r"field 'cases\[0\].colour': unknown field"),
    ({"model": "m", "batch_size": 2.0, "world_size": 2, "network": "loopback",
      "compute": "c.csv"}, r"field 'cases\[0\].batch_size'.*not of type 'integer'"),
    ({"model": "m", "batch_size": 1, "world_size": 2, "network": "loopback",
      "compute": "c.txt"}, r"field 'cases\[0\].compute'.*a compute trace CSV"),
])
def test_bad_cases_are_refused(entry, message):
    with pytest.raises(InputError, match=message) as info:
        config.parse_cases([entry], "reexec.yaml")
    assert str(info.value).startswith("reexec.yaml, field 'cases[0]")


def test_duplicate_case_and_bad_settings():
    entry = {"model": "m", "batch_size": 1, "world_size": 2, "network": "loopback",
             "compute": "c.csv"}
    with pytest.raises(InputError, match="second case"):
        config.parse_cases([entry, entry])
    with pytest.raises(InputError, match=r"field 'settings.iterz': unknown field"):
        config.parse_settings({"iterz": 3})
    with pytest.raises(ConfigError, match="unknown algorithm"):
        config.parse_settings({"algorithms": ["nope"]})
    with pytest.raises(ConfigError, match=r"field 'settings.iters'.*minimum of 1"):
        config.parse_settings({"iters": 0})
    with pytest.raises(ConfigError, match=r"field 'settings.timeout_s'"):
        config.parse_settings({"timeout_s": float("nan")})
    with pytest.raises(ConfigError, match="unknown case"):
        config.select_cases(config.parse_cases([entry]), ["other"])


@pytest.mark.parametrize("text, field", [
    ("reexec: {cases: []}", "reexec.cases"),
    ("reexec: {settings: {iters: 0}, cases: []}", "reexec.settings.iters"),
    ("reexec: {cases: [{model: m}]}", "reexec.cases[0].batch_size"),
    ("reexec: {case: []}", "reexec.case"),
    ("reexec: [1]", "reexec"),
    ("- 1", None),
])
def test_config_file_errors_name_the_file_and_the_field(tmp_path, text, field):
    path = tmp_path / "reexec.yaml"
    path.write_text(text + "\n")
    with pytest.raises(InputError) as info:
        config.load_config(path)
    assert info.value.path == str(path) and info.value.field == field


def test_committed_config_parses(repo):
    cases, settings = config.load_config(repo / "config" / "reexec.yaml")
    assert cases and settings.algorithms
    for case in cases:
        assert Path(repo / case.compute).is_file()
        assert Path(repo / case.comm).is_file()


# ----------------------------------------------------------------------------- plans
def test_executor_key_ignores_timing_hints_only():
    a = Plan("x", (Bucket(("a", "b")), Bucket(("c",), chunks=2)))
    b = Plan("y", (Bucket(("a", "b"), release_s=0.5, algorithm="ring"),
                   Bucket(("c",), chunks=2)), channels=2, knobs={"k": 1})
    c = Plan("x", (Bucket(("a", "b")), Bucket(("c",), chunks=2, priority=0)))
    d = Plan("x", (Bucket(("a", "b")), Bucket(("c",), chunks=2)), update="per_layer")
    key = run.executor_key
    assert key(a.to_dict()) == key(b.to_dict())
    assert key(a.to_dict()) != key(c.to_dict())
    assert key(a.to_dict()) != key(d.to_dict())


def test_round_order_is_a_seeded_random_permutation():
    orders = [run_order.round_order(8, r, seed=3) for r in range(6)]
    for order in orders:
        assert sorted(order) == list(range(8))
    assert len({tuple(o) for o in orders}) == 6  # every round its own order
    assert len({o[0] for o in orders}) > 1  # not always the same item first
    assert orders == [run_order.round_order(8, r, seed=3) for r in range(6)]  # reproducible
    assert orders != [run_order.round_order(8, r, seed=4) for r in range(6)]


def test_ddp_default_cap_is_its_own_item(tmp_path):
    trace = tiny_mlp_trace(tmp_path / "tiny.csv")
    case = config.Case("c", "tiny-mlp", 4, 2, "loopback", str(trace), ALPHA_BETA)
    settings = config.parse_settings({"algorithms": ["ddp"],
                                          "ddp_bucket_cap_mb": ["default", 25]})
    assert settings.ddp_bucket_cap_mb == (None, 25.0)
    cp = run.make_case_plans(case, settings)
    native = {it["key"]: it["bucket_cap_mb"] for it in cp.items if it["kind"] == "ddp"}
    assert native == {"ddp-native-default": None, "ddp-native-25": 25.0}
    with pytest.raises(InputError, match=r"field 'settings.ddp_bucket_cap_mb\[0\]'.*'default'"):
        config.parse_settings({"ddp_bucket_cap_mb": ["big"]})


def test_case_plans_dedupe_and_ddp_items(tmp_path):
    trace = tiny_mlp_trace(tmp_path / "tiny.csv")
    case = config.Case("c", "tiny-mlp", 4, 2, "loopback", str(trace), ALPHA_BETA)
    settings = config.Settings(algorithms=("wfbp", "syncsgd", "ddp", "best"),
                                   ddp_bucket_cap_mb=(25.0, 1.0))
    cp = run.make_case_plans(case, settings)
    assert set(cp.plans) == {"wfbp", "syncsgd", "ddp", "best", "ddp-native-25",
                             "ddp-native-1"}
    # the tiny MLP fits in DDP's 1 MiB first bucket: ddp = syncsgd, one measurement
    assert cp.item_of["ddp"] == cp.item_of["syncsgd"]
    keys = [it["key"] for it in cp.items]
    assert keys[-1] == run.CONTROL and len(keys) == len(set(keys))
    assert {"ddp-native-25", "ddp-native-1"} <= set(keys)


def test_scaled_trace_scales_compute_only(tmp_path):
    trace = ComputeTrace.load(tiny_mlp_trace(tmp_path / "tiny.csv"))
    scaled = predict.scaled_trace(trace, 3.0)
    assert math.isclose(predict.trace_compute_s(scaled),
                        3.0 * predict.trace_compute_s(trace))
    assert scaled.frame["bytes"].equals(trace.frame["bytes"])
    from gradsched.costmodel.base import load_comm_spec

    one = Plan("syncsgd", (Bucket(tuple(trace.names)),))
    free = load_comm_spec("alpha-beta:alpha=0,beta=0")
    res = replay(scaled, one, free, 2)
    assert math.isclose(res.iteration_s, predict.trace_compute_s(scaled), rel_tol=1e-9)
    with pytest.raises(ConfigError):
        predict.scaled_trace(trace, 0.0)


def test_interference_spec_per_network(tmp_path):
    spec = config.parse_interference_args(["a.json", "tbf100mbit=b.json"])
    assert config.interference_for(spec, "tbf100mbit") == "b.json"
    assert config.interference_for(spec, "loopback") == "a.json"
    assert config.interference_for(None, "loopback") is None
    with pytest.raises(ConfigError):
        config.parse_interference_args(["wan=x.json"])
    with pytest.raises(ConfigError):
        config.parse_interference_args(["loopback-3=x.json"])
    per_world = config.parse_interference_args(
        ["loopback-p3=l3.json", "loopback-p2=l2.json", "tbf1gbit-p2=g2.json", "*=any.json"])
    assert config.interference_for(per_world, "loopback", 3) == "l3.json"
    assert config.interference_for(per_world, "loopback", 4) == "l2.json"  # smallest P
    assert config.interference_for(per_world, "tbf1gbit", 3) == "g2.json"
    assert config.interference_for(per_world, "tbf100mbit", 2) == "any.json"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="compute_slowdown"):
        config.load_interference(bad)
    bad.write_text('{"compute_slowdown": 1.2, "comm_slowdown": 2, "collective_cpu_s": "x"}')
    with pytest.raises(InputError, match="collective_cpu_s"):
        config.load_interference(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="line 1"):
        config.load_interference(bad)
    old = tmp_path / "old.json"  # written before collective_cpu_s was measured
    old.write_text('{"compute_slowdown": 1.0, "comm_slowdown": 2.5}')
    params, _ = config.load_interference(old)
    assert params == {"compute_slowdown": 1.0, "comm_slowdown": 2.5, "collective_cpu_s": 0.0}
    old.write_text('{"compute_slowdown": 0.9, "comm_slowdown": 2.5}')  # refused, not clamped
    with pytest.raises(InputError, match=r"compute_slowdown.*out of range"):
        config.load_interference(old)
    assert config.load_interference(None)[0] == config.NO_INTERFERENCE


# ----------------------------------------------------------------------------- real launches
@pytest.mark.slow
def test_end_to_end_tiny(tmp_path):
    trace = tiny_mlp_trace(tmp_path / "tiny.csv")
    config_file = tmp_path / "reexec.yaml"
    config_file.write_text(
        "reexec:\n"
        "  settings: {algorithms: [wfbp, best], ddp_bucket_cap_mb: [25], warmup: 1,\n"
        "             ddp_bucket_cap_mb_list_from: [contiguous_optimum],\n"
        "             iters: 2, rounds: 1, timeout_s: 60}\n"
        "  cases:\n"
        f"    - {{model: tiny-mlp, batch_size: 4, world_size: 2, network: loopback,\n"
        f"       compute: {trace}, comm: traces/comm/cpu/gloo-loopback-p2.csv, name: tiny}}\n")
    out = tmp_path / "out"
    # the test suite's other worker keeps the machine busy: measure anyway (flagged)
    assert main(["reexec", "run", "--config", str(config_file), "-o", str(out),
                 "--allow-load"]) == 0
    folder = out / "tiny"
    its = pd.read_csv(folder / "iterations.csv")
    assert list(its.columns) == list(run.ITERATION_COLUMNS)
    assert (its.groupby("item").size() == 2).all()
    assert run.CONTROL in set(its["item"])
    foreign = its["foreign_cpu_cores"].to_numpy()
    assert np.isfinite(foreign).all() and (foreign >= 0).all()
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["machine"]["logical_cpus"] >= 1 and len(meta["load_average_before"]) == 3
    # stock DDP with the contiguous optimum's caps rebuilt that plan's buckets, every rank
    rebuilt = meta["ddp_rebuilt_buckets"]["ddp-list-contiguous_optimum"]
    assert rebuilt["buckets_match_plan"] and rebuilt["same_every_rank_and_round"]
    plan = Plan.load(folder / "plans" / "ddp-list-contiguous_optimum.plan.json")
    assert rebuilt["n_buckets"] == len(plan.buckets) == rebuilt["n_plan_buckets"]
    inter = tmp_path / "inter.json"
    inter.write_text(json.dumps({"compute_slowdown": 1.5, "comm_slowdown": 2.0}))
    measured = tmp_path / "measured.csv"
    assert main(["reexec", "collect", str(folder), "--interference", str(inter),
                 "-o", str(measured), "--provenance", str(tmp_path / "prov.json")]) == 0
    table = pd.read_csv(measured)
    for col in ("model", "world_size", "bandwidth", "algorithm", "predicted_s", "measured_s",
                "predicted_interference_s", "predicted_dynamic_s", "measured_p10_s",
                "measured_p90_s", "iters",
                "load_avg"):
        assert col in table.columns
    assert set(table["algorithm"]) == {"wfbp", "best", "ddp-native-25", "compute-only",
                                       "ddp-list-contiguous_optimum"}
    listed = table.loc[table["algorithm"] == "ddp-list-contiguous_optimum"].iloc[0]
    assert listed["kind"] == "ddp-list" and listed["item"] == "ddp-list-contiguous_optimum"
    ctrl = table.loc[table["algorithm"] == "compute-only"].iloc[0]
    # equal up to the CSV's 9 significant digits (each rounded on its own)
    assert math.isclose(ctrl["predicted_s"], ctrl["measured_s"], rel_tol=1e-8)
    plans = table.loc[table["kind"] != "control"]
    assert (plans["predicted_interference_s"] >= plans["predicted_s"] - 1e-12).all()
    assert (table["measured_p10_s"] <= table["measured_p90_s"]).all()
    prov = json.loads((tmp_path / "prov.json").read_text())
    assert prov["cases"]["tiny"]["settings"]["iters"] == 2
    assert {"foreign_cpu_cores_max", "n_flagged_runs"} <= set(table.columns)
    assert main(["reexec", "collect", str(folder), "-o", str(tmp_path / "m2.csv"),
                 "--iterations-csv", str(tmp_path / "its.csv")]) == 0
    assert main(["reexec", "analyze", "--input", str(measured), "--stats",
                 str(tmp_path / "stats.csv"), "--iterations-csv", str(tmp_path / "its.csv"),
                 "--errors", str(tmp_path / "errors.csv"),
                 "--summary-md", str(tmp_path / "summary.md"), "--figure", str(tmp_path / "f.pdf"),
                 "--png", str(tmp_path / "f.png"), "--md", str(tmp_path / "t.md")]) == 0
    assert (tmp_path / "f.pdf").stat().st_size > 0 and (tmp_path / "f.png").stat().st_size > 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| tiny, P=2, loopback |" in summary  # a named case keeps its name
    errors = pd.read_csv(tmp_path / "errors.csv")
    assert (errors["measured_lo_s"] <= errors["measured_s"] + 1e-12).all()
    assert (errors["measured_s"] <= errors["measured_hi_s"] + 1e-12).all()


def test_a_busy_machine_is_refused_before_measuring(tmp_path, monkeypatch, capsys):
    from gradsched.runtime import load
    from gradsched.runtime.rounds import MachineBusyError

    monkeypatch.setattr(load, "busy_cores", lambda seconds=2.0: 1.3)
    trace = tiny_mlp_trace(tmp_path / "tiny.csv")
    case = config.Case("c", "tiny-mlp", 4, 2, "loopback", str(trace), ALPHA_BETA)
    settings = config.Settings(algorithms=("wfbp",), ddp_bucket_cap_mb=(25.0,))
    with pytest.raises(MachineBusyError, match=r"1\.30 CPU cores are busy"):
        run.run_case(case, settings, tmp_path / "out")
    assert not (tmp_path / "out" / "c" / "iterations.csv").exists()
