"""A YAML alias bomb is refused before anything walks it (``gradsched.io.parse_yaml``).

Nine lines of ten aliases each describe 10^9 values (the "billion laughs"). PyYAML builds
them shared and quickly; the schema check and any printed value then walk every copy (200 s
and out of memory under a 4 GB limit, on commit 181ccde). The reader counts the expanded
size on the composed node graph, memoised per node, and refuses the file with one line
naming it before any check sees the value. The bombs are SYNTHETIC.

The command-line cases run in a child process with a generous timeout, so a regression
fails the test instead of taking the machine's memory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gradsched
from gradsched.errors import InputError
from gradsched.io import MAX_YAML_NODES, parse_yaml, read_yaml
from tests.conftest import REPO

SRC = str(Path(gradsched.__file__).resolve().parents[1])
"""The sources this test process imports: the child runs the same code."""

COMPUTE = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"


def bomb(levels: int = 9, width: int = 10, indent: str = "") -> str:
    """``width`` ** (``levels`` + 1) values in ``levels`` + 1 lines of aliases."""
    lines = [f"{indent}a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_a_billion_values_are_refused_naming_the_file() -> None:
    with pytest.raises(InputError, match=r"bomb\.yaml, line \d+: more than 1000000 values"):
        parse_yaml(bomb(), "bomb.yaml")


def test_aliases_within_the_bound_still_load(tmp_path: Path) -> None:
    doc = parse_yaml("base: &b {iters: 3, rounds: 2}\nother: *b\nlist: [*b, *b]\n", "ok.yaml")
    assert doc["other"] == {"iters": 3, "rounds": 2} and len(doc["list"]) == 2
    small = parse_yaml(bomb(levels=4), "small.yaml")  # 10^5 values: under the bound
    assert len(small["a4"]) == 10 and MAX_YAML_NODES > 10**5
    (tmp_path / "empty.yaml").write_text("", encoding="utf-8")
    assert read_yaml(tmp_path / "empty.yaml") is None


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "gradsched", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("command", ["replay --topology", "reexec run --config"])
def test_a_bomb_in_a_topology_or_reexec_config_ends_with_one_line(
        tmp_path: Path, command: str) -> None:
    path = tmp_path / "bomb.yaml"
    if command.startswith("replay"):
        path.write_text(bomb(), encoding="utf-8")
        argv = ["replay", "--compute", str(COMPUTE), "--topology", str(path), "-o", "r.csv"]
    else:
        path.write_text("reexec:\n" + bomb(indent="  "), encoding="utf-8")
        argv = ["reexec", "run", "--config", str(path), "--list"]
    done = _cli(tmp_path, *argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and "bomb.yaml" in lines[0] and "aliases" in lines[0], lines
    assert not (tmp_path / "r.csv").exists()
