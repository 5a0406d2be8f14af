"""Every config file the workflow reads is checked against its own schema
(workflow/schemas/), with the schema's defaults filled in; a misspelt key is refused with a
message naming the file and the key."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gradsched.errors import ConfigError
from gradsched.pipeline.configfiles import check_mapping, load_checked

validate = pytest.importorskip("snakemake.utils").validate

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "workflow" / "schemas"
TOPOLOGY = "config/topologies/abci-a100-2x8-flat.yaml"
FILES = {  # config file -> its schema
    "config/capture.yaml": "capture",
    "config/reexec.yaml": "reexec",
    "config/reexec-accum.yaml": "reexec",
    "config/published-scaling.yaml": "published-scaling",
    **{f"config/topologies/{p.name}": "topology"
       for p in sorted((REPO / "config/topologies").glob("*.yaml"))},
}


def schema(name: str) -> str:
    return str(SCHEMAS / f"{name}.schema.yaml")


def load(relative: str) -> dict:
    return yaml.safe_load((REPO / relative).read_text())


@pytest.mark.parametrize("relative", sorted(FILES))
def test_the_shipped_files_pass(relative: str) -> None:
    data = load_checked(REPO / relative, schema(FILES[relative]), validate)
    assert data


def _typo_in(data: dict, *keys: str | int, key: str) -> None:
    for k in keys:
        data = data[k]
    data[key] = 1


TYPOS: list[tuple[str, Callable[[dict], None], str]] = [
    ("config/capture.yaml", lambda d: _typo_in(d, key="captur"), "captur"),
    ("config/capture.yaml", lambda d: _typo_in(d, "capture", key="teirs"), "teirs"),
    ("config/capture.yaml", lambda d: _typo_in(d, "capture", "defaults", key="warmpu"),
     "warmpu"),
    ("config/capture.yaml", lambda d: _typo_in(d, "capture", "compute", 3, key="batch_sise"),
     "batch_sise"),
    ("config/capture.yaml",
     lambda d: _typo_in(d, "capture", "comm", "cluster", 0, key="rates"), "rates"),
    ("config/capture.yaml", lambda d: _typo_in(d, "capture", "iteration", 1, key="nproc"),
     "nproc"),
    ("config/reexec.yaml", lambda d: _typo_in(d, "reexec", key="case"), "case"),
    ("config/reexec.yaml", lambda d: _typo_in(d, "reexec", "settings", key="iterations"),
     "iterations"),
    ("config/reexec.yaml", lambda d: _typo_in(d, "reexec", "cases", 0, key="batchsize"),
     "batchsize"),
    ("config/reexec.yaml", lambda d: _typo_in(d, "reexec", "interference", key="network"),
     "network"),
    ("config/published-scaling.yaml", lambda d: _typo_in(d, key="case"), "case"),
    ("config/published-scaling.yaml", lambda d: _typo_in(d, "cases", 1, key="worldsize"),
     "worldsize"),
    (TOPOLOGY, lambda d: _typo_in(d, key="ranks_per_nodes"), "ranks_per_nodes"),
]


@pytest.mark.parametrize("relative, mutate, key", TYPOS)
def test_a_misspelt_key_is_refused_naming_the_file_and_the_key(
        tmp_path: Path, relative: str, mutate: Callable[[dict], None], key: str) -> None:
    data = load(relative)
    mutate(data)
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_checked(path, schema(FILES[relative]), validate)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert repr(key) in message and "Additional properties are not allowed" in message


@pytest.mark.parametrize("relative, mutate, needle", [
    ("config/capture.yaml", lambda d: d["capture"].update(tiers=["tpu"]), "capture.tiers[0]"),
    ("config/capture.yaml", lambda d: d["capture"]["comm"]["cluster"][0].pop("rate"),
     "'rate' is a required property"),
    ("config/reexec.yaml", lambda d: d["reexec"]["cases"][0].update(network="eth0"),
     "reexec.cases[0].network"),
    ("config/published-scaling.yaml", lambda d: d["cases"][0].update(key="dgx1"),
     "cases[0].key"),
    (TOPOLOGY, lambda d: d.pop("ranks_per_node"), "is not valid under any of the given"),
])
def test_a_bad_value_names_its_place(relative: str, mutate: Callable[[dict], None],
                                     needle: str) -> None:
    data = load(relative)
    mutate(data)
    with pytest.raises(ConfigError) as info:
        check_mapping(data, relative, schema(FILES[relative]), validate)
    assert str(info.value).startswith(f"{relative}: ") and needle in str(info.value)


def test_defaults_are_filled_in() -> None:
    capture = check_mapping({"capture": {}}, "c", schema("capture"), validate)
    assert capture == {"capture": {"tiers": ["cpu"]}}
    reexec = check_mapping({"reexec": {"interference": {}}}, "r", schema("reexec"), validate)
    assert reexec["reexec"] == {"cases": [], "interference": {"networks": ["loopback"],
                                                              "world_sizes": [2]}}


def test_a_missing_file_is_empty_and_a_non_mapping_refused(tmp_path: Path) -> None:
    assert load_checked(tmp_path / "absent.yaml", schema("capture"), validate) == {}
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping, got list"):
        load_checked(path, schema("capture"), validate)


def test_the_shipped_files_are_left_as_the_cli_reads_them() -> None:
    """Defaults fill only what the workflow reads; the data of the shipped files is kept."""
    for relative, name in FILES.items():
        data = load(relative)
        before = copy.deepcopy(data)
        check_mapping(data, relative, schema(name), validate)
        assert data == before


@pytest.mark.slow
def test_snakemake_stops_on_a_misspelt_key_naming_the_file(tmp_path: Path) -> None:
    snakemake = Path(sys.executable).parent / "snakemake"
    if not snakemake.exists():
        pytest.skip("snakemake is not in the venv")
    for name in ("Snakefile", "workflow", "config", "profiles", "traces"):
        src = REPO / name
        copy_ = shutil.copytree if src.is_dir() else shutil.copy2
        copy_(src, tmp_path / name)
    path = tmp_path / "config/reexec.yaml"
    path.write_text(path.read_text().replace("  settings:", "  setings:", 1))
    proc = subprocess.run([str(snakemake), "-n", "--nolock", "--cores", "1", "smoke"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "config error: config/reexec.yaml: reexec: Additional properties" in output
    assert "'setings'" in output
