"""gradsched.pipeline.reexec: calibrations, targets and arguments of the re-execution stage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gradsched.errors import ConfigError
from gradsched.networks import NETWORKS
from gradsched.pipeline import reexec as stage

REPO = Path(__file__).resolve().parents[2]
WHERE = "config/reexec.yaml"


@dataclass
class Case:
    name: str
    network: str
    world_size: int


SPEC = {"interference": {"backend": "gloo", "networks": ["tbf1gbit", "tbf100mbit"],
                         "world_sizes": [2, 3], "kernel": "conv", "reps": 40}}


def test_defaults_are_loopback_at_two_ranks() -> None:
    assert stage.networks({}) == ["loopback"]
    assert stage.interference_world_sizes({}, WHERE) == [2]
    assert stage.calibrations({}, WHERE) == [("loopback", 2)]


def test_world_sizes_below_two_are_refused() -> None:
    needle = "config/reexec.yaml: interference world_sizes must be >= 2"
    with pytest.raises(ConfigError, match=re.escape(needle)):
        stage.interference_world_sizes({"interference": {"world_sizes": [1]}}, WHERE)


def test_calibrations_and_their_files() -> None:
    assert stage.calibrations(SPEC, WHERE) == [("tbf1gbit", 2), ("tbf1gbit", 3),
                                               ("tbf100mbit", 2), ("tbf100mbit", 3)]
    assert stage.calibration_files(SPEC, "out", WHERE)[1] == "out/interference-tbf1gbit-p3.json"


@pytest.mark.parametrize("network, world, expected", [
    ("tbf100mbit", 3, ("tbf100mbit", 3)),   # its own
    ("tbf100mbit", 4, ("tbf100mbit", 2)),   # its network's first world size
    ("loopback", 3, ("tbf1gbit", 3)),       # the first network's
])
def test_calibration_for_falls_back_in_order(network: str, world: int, expected: tuple) -> None:
    assert stage.calibration_for(SPEC, network, world, WHERE) == expected


def test_case_interference_names_the_calibration_file() -> None:
    cases = [Case("a", "loopback", 4), Case("b", "tbf100mbit", 3)]
    assert stage.case_interference(SPEC, cases, "a", "out", WHERE) == \
        "out/interference-tbf1gbit-p2.json"
    assert stage.case_interference(SPEC, cases, "b", "out", WHERE) == \
        "out/interference-tbf100mbit-p3.json"
    with pytest.raises(ConfigError, match=re.escape("reexec: no case 'c' in config/reexec.yaml")):
        stage.case_interference(SPEC, cases, "c", "out", WHERE)


def test_interference_args_take_the_tc_rate_from_the_network_table() -> None:
    assert stage.interference_args(SPEC, "tbf100mbit", "3") == \
        "--backend gloo --kernel conv --reps 40 --world-size 3 --cluster 100mbit"
    assert stage.interference_args({}, "loopback", 2) == "--world-size 2"
    with pytest.raises(ConfigError, match="unknown network 'eth0'"):
        stage.interference_args({}, "eth0", 2)


def test_network_pattern_is_every_network_key() -> None:
    assert stage.NETWORK_PATTERN.split("|") == list(NETWORKS)


def test_collect_interference_args_add_the_first_as_wildcard() -> None:
    files = stage.calibration_files(SPEC, "o", WHERE)
    args = stage.collect_interference_args(SPEC, files, WHERE)
    assert args.split(" --interference ")[0] == \
        "--interference tbf1gbit-p2=o/interference-tbf1gbit-p2.json"
    assert args.endswith("--interference '*=o/interference-tbf1gbit-p2.json'")
    assert args.count("--interference") == 5


def test_case_folders_and_committed_files() -> None:
    assert stage.case_folders(["r/a/meta.json", "r/b/meta.json"]) == "r/a r/b"
    files = stage.committed_files("F", "T", "R")
    assert files[0] == "F/reexec.pdf" and files[-1] == "R/reexec-committed/stats.csv"


def _schema() -> dict:
    return yaml.safe_load((REPO / "workflow/schemas/reexec.schema.yaml").read_text())["$defs"]


def test_schema_agrees_with_the_network_table_and_the_parsers() -> None:
    from gradsched.reexec.config import Case, Settings

    defs = _schema()
    assert defs["network"]["enum"] == list(NETWORKS)
    assert set(defs["case"]["properties"]) == set(Case.__dataclass_fields__)
    assert set(defs["settings"]["properties"]) == set(Settings.__dataclass_fields__)
    assert set(defs["interference"]["properties"]) == \
        set(stage.INTERFERENCE_OPTIONS) | {"networks", "world_sizes"}


def test_schema_bounds_are_the_limits() -> None:
    """The schema states the package's limits (gradsched.limits, gradsched.names)."""
    from gradsched.limits import MAX_RANKS, MAX_REPLAY_ITERATIONS, MAX_SECONDS
    from gradsched.names import MAX_NAME_CHARS, PLAIN_NAME

    defs = _schema()
    settings, case = defs["settings"]["properties"], defs["case"]["properties"]
    assert defs["iterations"]["maximum"] == MAX_REPLAY_ITERATIONS
    for key in ("warmup", "replay_iterations"):
        assert settings[key]["maximum"] == MAX_REPLAY_ITERATIONS
    assert settings["timeout_s"]["maximum"] == MAX_SECONDS
    assert case["world_size"]["maximum"] == MAX_RANKS
    assert case["name"]["maxLength"] == MAX_NAME_CHARS
    assert case["name"]["pattern"] == f"^{PLAIN_NAME.pattern}$"
