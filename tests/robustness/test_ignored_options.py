"""No option is silently ignored, and no input silently overrides another (the "ignored
options" family): each option is honoured or refused with a reason; a YAML key written
twice, two manifest entries writing one file under two spellings, and errors that do not
name their file are refused or fixed. All inputs are SYNTHETIC (made below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.plan_sharded import ShardedPlan
from tests.conftest import synthetic_comm_trace, synthetic_compute_trace

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("options")
    synthetic_compute_trace(8).save(d / "c.csv")
    synthetic_comm_trace([2**k for k in range(2, 24, 2)]).save(d / "m.csv")
    text = (d / "c.csv").read_text(encoding="utf-8")  # block names: blocks.<i>.weight
    (d / "b.csv").write_text(text.replace("\nlayer", "\nblocks."), encoding="utf-8")
    (d / "b.meta.json").write_text((d / "c.meta.json").read_text(encoding="utf-8"),
                                   encoding="utf-8")
    (d / "inter.json").write_text(json.dumps({"compute_slowdown": 1.0, "comm_slowdown": 1.0}),
                                  encoding="utf-8")
    return d


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err, out.err
    return code, out.out, out.err


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    code, _, err = _run(argv, capsys)
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert "error:" in last and all(n in last for n in needles), last
    return last


SHARDED = ["advise", "--compute", "{d}/b.csv", "--comm", "{d}/m.csv", "--world-size", "4",
           "--sharded"]


def _args(argv: list[str], d: Path) -> list[str]:
    return [a.replace("{d}", str(d)) for a in argv]


def test_advise_sharded_writes_its_plan_out(work: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "sp.json"
    code, printed, err = _run(_args([*SHARDED, "--plan-out", str(out)], work), capsys)
    assert code == 0, err
    plan = ShardedPlan.load(out)  # the layout shard run takes
    assert plan.units and str(out) in printed


@pytest.mark.parametrize("extra", [["--caps", "1,2"], ["--interference", "{d}/inter.json"],
                                   ["--current-bucket-cap-mb", "25"]],
                         ids=["caps", "interference", "current-cap"])
def test_advise_sharded_refuses_ddp_settings(extra: list[str], work: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _refused(_args([*SHARDED, *extra], work), capsys, extra[0], "--sharded")


def test_yaml_key_written_twice_is_an_error(work: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    analytic = "{kind: analytic, alpha_s: 1.0e-6, beta_s_per_byte: 1.0e-10, algorithm: ring}"
    topo = work / "dup.yaml"
    topo.write_text(f"nodes: 2\nranks_per_node: 2\nnodes: 4\nintra: {analytic}\n"
                    f"inter: {analytic}\n", encoding="utf-8")
    _refused(["replay", "--compute", str(work / "c.csv"), "--topology", str(topo), "-o",
              str(work / "o.csv")], capsys, "dup.yaml", "duplicate key 'nodes'")
    assert not (work / "o.csv").exists()


def test_manifest_outputs_are_compared_normalised(work: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tests.robustness.test_inputs_table import SYNTHETIC_NCCL

    (work / "nccl.txt").write_text(SYNTHETIC_NCCL, encoding="utf-8")
    entry = "  - file: nccl.txt\n    importer: nccl-tests\n    out: {out}\n" \
            "    args: {{source: SYNTHETIC, hardware: none}}\n"
    manifest = work / "same.yaml"
    manifest.write_text("version: 1\nfiles:\n" + entry.format(out="same.csv")
                        + entry.format(out="./same.csv"), encoding="utf-8")
    _refused(["import", "manifest", str(manifest), "--src", str(work), "-o",
              str(work / "mout")], capsys, "same.yaml", "also written by entry 1")
    assert not (work / "mout").exists()


def _plan_file(work: Path) -> Path:
    plan = {"format": "gradsched.plan", "format_version": 2, "algorithm": "synthetic",
            "buckets": [{"tensors": ["not.a.tensor"]}]}
    (work / "other.json").write_text(json.dumps(plan), encoding="utf-8")
    return work / "other.json"


@pytest.mark.parametrize("extra", [["--emit", "ddp"], ["-o", "{d}/x.json"],
                                   ["--emit", "ddp", "--comm", "{d}/m.csv"]],
                         ids=["other-trace", "no-emit", "with-comm"])
def test_plan_from_errors_name_the_plan_file(extra: list[str], work: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    plan = _plan_file(work)
    _refused(_args(["plan", "--from", str(plan), "--compute", "{d}/c.csv", *extra], work),
             capsys, str(plan))


def test_a_legal_long_output_name_is_written(work: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """244 bytes of name: legal (255 is the limit); the hidden temporary name beside it is
    shortened instead of refused."""
    name = "r" * 240 + ".csv"
    code, _, err = _run(["replay", "--compute", str(work / "c.csv"), "--comm",
                         str(work / "m.csv"), "-o", str(work / name)], capsys)
    assert code == 0, err
    assert (work / name).is_file()
    assert not [p for p in work.iterdir() if p.name.endswith((".tmp", ".staging"))]


@pytest.mark.parametrize("extra", [["--budget-s", "nan"], ["--budget-s", "0"],
                                   ["--threads", "0"], ["--threads", "1_6"]])
def test_gpu_check_refuses_bad_options(extra: list[str], tmp_path: Path) -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, str(REPO / "benchmarks/gpu/gpu_check.py"),
                           "--out", str(tmp_path / "out"), *extra], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert f"argument {extra[0]}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
