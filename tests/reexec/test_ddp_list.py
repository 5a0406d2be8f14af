"""The re-execution's stock-DDP-list item: ``ddp_bucket_cap_mb_list_from`` in the settings
and its expansion into one ``ddp-list-<planner>`` item per case (no launch here; the real
run is in ``test_experiment.py::test_end_to_end_tiny``). Traces are SYNTHETIC."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from gradsched.errors import ConfigError, InputError
from gradsched.planners.ddp_caps import ddp_caps, rebuilt_groups
from gradsched.reexec import config, run
from gradsched.traces import ComputeTrace
from tests.reexec.test_experiment import ALPHA_BETA, tiny_mlp_trace


def test_setting_parses_and_round_trips():
    settings = config.parse_settings({"ddp_bucket_cap_mb_list_from": ["contiguous_optimum"]})
    assert settings.ddp_bucket_cap_mb_list_from == ("contiguous_optimum",)
    again = config.parse_settings(settings.to_dict())  # as collect reads meta.json
    assert again == settings
    assert config.Settings().ddp_bucket_cap_mb_list_from == ()  # off unless configured


@pytest.mark.parametrize(("value", "message"), [
    (["dear"], "contiguous all-reduce plans"),
    (["best"], "contiguous all-reduce plans"),
    ("contiguous_optimum", "not of type 'array'.*a list of names"),
    ([3], "not of type 'string'"),
])
def test_bad_setting_names_the_field(value, message):
    with pytest.raises(InputError, match=message) as exc:
        config.parse_settings({"ddp_bucket_cap_mb_list_from": value}, "reexec.yaml")
    assert "settings.ddp_bucket_cap_mb_list_from" in str(exc.value)


def test_list_item_needs_a_warmup():
    with pytest.raises(ConfigError, match="warmup >= 1"):
        config.parse_settings({"ddp_bucket_cap_mb_list_from": ["wfbp"], "warmup": 0})


def test_committed_config_runs_the_contiguous_optimum_on_stock_ddp(repo):
    _, settings = config.load_config(repo / "config" / "reexec.yaml")
    assert settings.ddp_bucket_cap_mb_list_from == ("contiguous_optimum",)


@pytest.mark.parametrize("algorithms", [("wfbp", "contiguous_optimum"), ("wfbp",)])
def test_item_expansion(tmp_path, algorithms):
    """One ddp-list item per configured planner, with the caps that rebuild its plan; the
    plan is the executor item's own when that planner is also measured."""
    trace_path = tiny_mlp_trace(tmp_path / "tiny.csv")
    case = config.Case("c", "tiny-mlp", 4, 2, "loopback", str(trace_path), ALPHA_BETA)
    settings = config.Settings(algorithms=algorithms, ddp_bucket_cap_mb=(25.0,),
                                   ddp_bucket_cap_mb_list_from=("contiguous_optimum", "wfbp"))
    cp = run.make_case_plans(case, settings)
    trace = ComputeTrace.load(trace_path)
    keys = [it["key"] for it in cp.items]
    assert len(keys) == len(set(keys)) and keys[-1] == run.CONTROL
    for planner in ("contiguous_optimum", "wfbp"):
        label = run.ddp_list_label(planner)
        assert cp.item_of[label] == label
        item = next(it for it in cp.items if it["key"] == label)
        plan = cp.plans[label]
        assert item["kind"] == "ddp-list" and item["plan"] is None
        assert plan.algorithm == planner
        if planner in algorithms:
            assert plan is cp.plans[planner]
        assert item["bucket_cap_mb_list"] == list(ddp_caps(plan, trace).exact_mb)
        assert item["expected_buckets"] == [list(b.tensors) for b in plan.buckets]
        # torch's closing rule on the trace's ready order gives back the plan's buckets
        sizes = [int(trace.frame.set_index("name").at[n, "bytes"])
                 for b in plan.buckets for n in b.tensors]
        ends = rebuilt_groups(sizes, item["bucket_cap_mb_list"])
        assert len(ends) == len(plan.buckets)


def test_rebuilt_record_flags_a_mismatch():
    """SYNTHETIC rank results: one rank rebuilt other buckets in its second round."""
    from gradsched.reexec.run import rebuilt_record

    items = [{"key": "ddp-list-wfbp", "kind": "ddp-list",
              "expected_buckets": [["b", "a"], ["c"]]},
             {"key": run.CONTROL, "kind": "control"}]
    good = [["a", "b"], ["c"]]
    results = [{"runs": [{"item": 0, "rebuilt_buckets": good},
                         {"item": 1, "rebuilt_buckets": None},
                         {"item": 0, "rebuilt_buckets": good}]},
               {"runs": [{"item": 0, "rebuilt_buckets": good},
                         {"item": 1, "rebuilt_buckets": None},
                         {"item": 0, "rebuilt_buckets": [["a"], ["b", "c"]]}]}]
    record = rebuilt_record(items, results)
    assert list(record) == ["ddp-list-wfbp"]
    assert record["ddp-list-wfbp"]["n_buckets"] == 2
    assert record["ddp-list-wfbp"]["buckets_match_plan"] is False
    assert record["ddp-list-wfbp"]["same_every_rank_and_round"] is False
    results[1]["runs"][2]["rebuilt_buckets"] = good
    assert rebuilt_record(items, results)["ddp-list-wfbp"]["buckets_match_plan"] is True
