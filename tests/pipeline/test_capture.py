"""gradsched.pipeline.capture: the capture stage's targets and command-line arguments."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
import yaml

from gradsched.errors import ConfigError
from gradsched.pipeline import capture as stage

REPO = Path(__file__).resolve().parents[2]


def shipped() -> dict:
    return yaml.safe_load((REPO / "config/capture.yaml").read_text())["capture"]


def test_compute_entries_merge_the_defaults_and_name_the_stem() -> None:
    spec = {
        "defaults": {"warmup": 2, "dtype": "fp32"},
        "compute": [
            {"model": "resnet18", "batch_size": 16},
            {"model": "bert-base", "batch_size": 2, "seq_len": 128, "device": "cuda:1",
             "dtype": "bf16"},
            {"model": "tiny-mlp", "batch_size": 1, "stem": "custom"},
        ],
    }
    entries = stage.compute_entries(spec)
    assert list(entries) == ["cpu/resnet18-b16-cpu-fp32", "cuda/bert-base-s128-b2-cuda-bf16",
                             "cpu/custom"]
    assert entries["cpu/resnet18-b16-cpu-fp32"] == {"warmup": 2, "dtype": "fp32",
                                                     "model": "resnet18", "batch_size": 16}
    assert stage.compute_entries({"compute": [{"model": "a.b", "batch_size": 1}]}) == {
        "cpu/a-b-b1-cpu-fp32": {"model": "a.b", "batch_size": 1}}
    # a config file names zoo models only: package.module:attr is refused
    with pytest.raises(ConfigError, match=r"capture.compute\[0\].model.*names code"):
        stage.compute_entries({"compute": [{"model": "a:b.c", "batch_size": 1}]})


@pytest.mark.parametrize("spec, needle", [
    ({"compute": [{"model": "resnet18"}]}, "capture.compute[0]: missing batch_size"),
    ({"compute": [{"model": "m", "batch_size": 1}, {"model": "m", "batch_size": 1}]},
     "capture.compute[1]: a second entry for cpu/m-b1-cpu-fp32"),
])
def test_compute_entries_refuse_incomplete_or_repeated_entries(spec: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        stage.compute_entries(spec)


def test_compute_args_in_entry_order_with_the_no_update_switch() -> None:
    spec = {"defaults": {"iters": 5}, "compute": [
        {"model": "resnet18", "batch_size": 4, "note": "two words", "no_update": True}]}
    args = stage.compute_args(spec, "cpu", "resnet18-b4-cpu-fp32")
    assert args == "--iters 5 --model resnet18 --batch-size 4 --note 'two words' --no-update"
    with pytest.raises(ConfigError, match=re.escape("no capture.compute entry makes")):
        stage.compute_args(spec, "cpu", "other")


def test_cli_flags_join_lists_and_quote() -> None:
    table = {"a": "--a", "b": "--b"}
    assert stage.cli_flags({"a": [1, 25], "b": "x y", "skip": 1}, table, skip=("skip",)) \
        == "--a 1,25 --b 'x y'"


@pytest.mark.parametrize("spec, field, needle", [
    ({"comm": {"loopback": [{}]}}, "capture.comm.loopback[0].name", "missing"),
    ({"comm": {"cluster": [{"name": "x"}]}}, "capture.comm.cluster[0].rate", "missing"),
    ({"comm": {"torchrun": [{"name": "x"}]}}, "capture.comm.torchrun[0].nproc_per_node",
     "missing"),
    ({"iteration": [{"name": "x"}]}, "capture.iteration[0].model", "missing"),
    ({"compute": [{"model": "m", "batch_size": 1, "clock": "sun"}]},
     "capture.compute[0].clock", "'sun' is not one of"),
    ({"comm": {"loopback": [{"name": "x", "iters": True}]}}, "capture.comm.loopback[0].iters",
     "True is not of type 'integer'"),
    ({"comm": {"loopback": [{"name": "x", "colour": 1}]}}, "capture.comm.loopback[0].colour",
     "unknown field"),
    ({"tiers": ["tpu"]}, "capture.tiers[0]", "'tpu' is not one of"),
    ([1], "capture", "not of type 'object'"),
])
def test_select_spec_checks_the_schema(spec: object, field: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        stage.select_spec(None, spec, "capture.yaml")
    assert str(info.value).startswith(f"capture.yaml, field '{field}'")


def test_the_shipped_capture_config_matches_the_schema() -> None:
    assert stage.select_spec(None, shipped()) == shipped()


def test_comm_args_map_rate_to_cluster_and_in_place_to_a_switch() -> None:
    spec = {"comm": {"cluster": [{"name": "n", "backend": "gloo", "rate": "1gbit",
                                  "in_place": True}],
                     "torchrun": [{"name": "g", "backend": "nccl", "nproc_per_node": 8}]}}
    assert stage.comm_args(spec, "cluster", "n") == "--backend gloo --cluster 1gbit --in-place"
    assert stage.comm_args(spec, "torchrun", "g") == "--backend nccl"
    assert stage.comm_nproc(spec, "g") == 8
    assert stage.comm_nproc(spec, "missing") == 1
    with pytest.raises(ConfigError, match=re.escape("no capture.comm.cluster entry named 'x'")):
        stage.comm_args(spec, "cluster", "x")


def test_iteration_entries_split_by_launcher() -> None:
    spec = shipped()
    assert list(stage.iteration_entries(spec, False)) == ["resnet18-b16-gloo-2"]
    assert list(stage.iteration_entries(spec, True)) == ["resnet50-b64-nccl-8"]
    assert stage.iteration_args(spec, "resnet18-b16-gloo-2", False) == (
        "--model resnet18 --batch-size 16 --world-size 2 --backend gloo "
        "--bucket-cap-mb 1,25 --iters 3")
    assert stage.iteration_nproc(spec, "resnet50-b64-nccl-8") == 8
    with pytest.raises(ConfigError, match="for this launcher"):
        stage.iteration_args(spec, "resnet18-b16-gloo-2", True)


def test_capture_targets_per_tier() -> None:
    spec = shipped()
    cpu = stage.capture_targets(spec, "cpu", "res")
    assert "results/captured/compute/cpu/resnet18-b16-cpu-fp32.csv" in cpu
    assert "results/captured/comm/loopback/gloo-loopback-2.csv" in cpu
    assert "res/capture/iteration/cpu/resnet18-b16-gloo-2/summary.csv" in cpu
    assert not any("cuda" in t for t in cpu)
    assert stage.capture_targets(spec, "cluster", "res") == [
        f"results/captured/comm/cluster/{e['name']}.csv" for e in spec["comm"]["cluster"]]
    gpu = stage.capture_targets(spec, "gpu", "res")
    assert "results/captured/comm/gpu/nccl-1node-8gpu.csv" in gpu
    assert "res/capture/iteration/gpu/resnet50-b64-nccl-8/summary.csv" in gpu
    assert all("/cuda/" in t for t in gpu if "/compute/" in t)
    assert stage.tier_targets(spec, "res") == cpu
    assert stage.tier_targets({**spec, "tiers": ["cluster", "gpu"]}, "res") == [
        *stage.capture_targets(spec, "cluster", "res"), *gpu]
    with pytest.raises(ConfigError, match="unknown tier 'tpu'"):
        stage.capture_targets(spec, "tpu", "res")


def test_is_gpu() -> None:
    assert stage.is_gpu({"device": "cuda:0"}) and stage.is_gpu({"backend": "nccl"})
    assert not stage.is_gpu({}) and not stage.is_gpu({"device": "cpu", "backend": "gloo"})


def test_select_spec_prefers_the_main_config() -> None:
    assert stage.select_spec({"tiers": ["gpu"]}, {"tiers": ["cpu"]}) == {"tiers": ["gpu"]}
    assert stage.select_spec(None, {"tiers": ["cpu"]}) == {"tiers": ["cpu"]}
    assert stage.select_spec(None, None) == {}


def test_torchrun_command(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    assert stage.torchrun_command(str(python)) == f"{shlex.quote(str(python))} -m " \
        "torch.distributed.run"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "torchrun").touch()
    assert stage.torchrun_command(str(python)) == str(tmp_path / "bin" / "torchrun")


def _subcommand(*names: str) -> argparse.ArgumentParser:
    from gradsched.cli import build_parser

    parser = build_parser()
    for name in names:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.mark.parametrize("command, table, switches", [
    ("compute", stage.COMPUTE_OPTIONS, ["--no-update"]),
    ("comm", stage.COMM_OPTIONS, ["--in-place"]),
    ("iteration", stage.ITERATION_OPTIONS, []),
])
def test_option_tables_name_options_of_the_cli(command: str, table: dict,
                                               switches: list[str]) -> None:
    parser = _subcommand("capture", command)
    options = {o for a in parser._actions for o in a.option_strings}
    if command == "comm" and "--backend" not in options:
        pytest.skip("gradsched capture comm is unavailable here")
    assert set(table.values()) | set(switches) <= options


def _schema() -> dict:
    return yaml.safe_load((REPO / "workflow/schemas/capture.schema.yaml").read_text())


@pytest.mark.parametrize("entry, table, others", [
    ("compute_entry", stage.COMPUTE_OPTIONS, stage.COMPUTE_OTHER_KEYS),
    ("comm_entry", stage.COMM_OPTIONS, stage.COMM_OTHER_KEYS),
    ("iteration_entry", stage.ITERATION_OPTIONS, stage.ITERATION_OTHER_KEYS),
])
def test_schema_keys_are_the_option_tables(entry: str, table: dict, others: tuple) -> None:
    assert set(_schema()["$defs"][entry]["properties"]) == set(table) | set(others)


def test_schema_tiers_and_comm_kinds_are_the_modules() -> None:
    capture = _schema()["$defs"]["capture"]["properties"]
    assert tuple(capture["tiers"]["items"]["enum"]) == stage.TIERS
    assert tuple(capture["comm"]["properties"]) == stage.COMM_KINDS
