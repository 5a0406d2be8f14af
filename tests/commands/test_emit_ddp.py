"""``gradsched plan --emit ddp`` and ``--from``: a plan as DDP's ``bucket_cap_mb_list``.

Inputs are the committed CPU traces (``traces/compute/cpu/resnet18-b4-cpu-fp32.csv``,
``traces/comm/cpu/gloo-tbf1gbit-p2.csv``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.plan import Plan
from gradsched.planners import planner_names
from gradsched.planners._family import MB

REPO = Path(__file__).resolve().parents[2]
COMPUTE = str(REPO / "traces" / "compute" / "cpu" / "resnet18-b4-cpu-fp32.csv")
COMM = str(REPO / "traces" / "comm" / "cpu" / "gloo-tbf1gbit-p2.csv")
BASE = ["plan", "--compute", COMPUTE]


def test_emit_ddp_prints_the_line_and_writes_the_caps(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "caps.json"
    code = main([*BASE, "--comm", COMM, "--algorithm", "contiguous_optimum", "--emit", "ddp",
                 "-o", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    caps = json.loads(out.read_text())
    assert caps["paste_line"] in printed
    assert printed.startswith("DistributedDataParallel(model, bucket_cap_mb_list=[")
    assert caps["algorithm"] == "contiguous_optimum" and caps["n_tensors"] == 62
    assert sum(caps["bucket_bytes"]) == sum(
        int(v) for v in _column(COMPUTE, "bytes"))
    assert [round(b / MB, 12) for b in caps["bucket_bytes"]] == \
        [round(v, 12) for v in caps["bucket_cap_mb_list_exact"]]
    assert len(caps["bucket_cap_mb_list"]) == len(caps["bucket_bytes"]) > 1


def test_emit_ddp_without_output_only_prints(tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    assert main([*BASE, "--comm", COMM, "--algorithm", "ddp-list", "--emit", "ddp"]) == 0
    assert "bucket_cap_mb_list=[" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_from_converts_an_existing_plan(tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    plan_path = tmp_path / "mgwfbp.json"
    assert main([*BASE, "--comm", COMM, "--algorithm", "mgwfbp", "-o", str(plan_path)]) == 0
    assert main([*BASE, "--comm", COMM, "--algorithm", "mgwfbp", "--emit", "ddp"]) == 0
    direct = capsys.readouterr().out.splitlines()[-1]
    assert main([*BASE, "--from", str(plan_path), "--emit", "ddp"]) == 0
    assert capsys.readouterr().out.strip() == direct


def test_plan_ddp_cannot_run_names_the_property(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    """A DeAR-style plan (reduce-scatter + all-gather, per-layer update) is refused with
    the plan file and the field, exit status 2 (errors.py: InputError)."""
    plan_path = tmp_path / "wfbp.json"
    assert main([*BASE, "--comm", COMM, "--algorithm", "wfbp", "-o", str(plan_path)]) == 0
    data = json.loads(plan_path.read_text())
    data["update"] = "per_layer"
    plan_path.write_text(json.dumps(data))
    Plan.load(plan_path)  # a valid plan, only not DDP's
    capsys.readouterr()
    assert main([*BASE, "--from", str(plan_path), "--emit", "ddp"]) == 2
    err = capsys.readouterr().err
    assert str(plan_path) in err and "field 'update'" in err and "per_layer" in err
    assert "Traceback" not in err


def test_non_contiguous_plan_is_refused(tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    plan_path = tmp_path / "swapped.json"
    assert main([*BASE, "--comm", COMM, "--algorithm", "wfbp", "-o", str(plan_path)]) == 0
    data = json.loads(plan_path.read_text())
    first, second = data["buckets"][0]["tensors"], data["buckets"][2]["tensors"]
    data["buckets"][0]["tensors"], data["buckets"][2]["tensors"] = second, first
    plan_path.write_text(json.dumps(data))
    assert main([*BASE, "--from", str(plan_path), "--emit", "ddp"]) == 2
    assert "not the next contiguous run" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "message"), [
    (["--comm", COMM], "exactly one of --algorithm"),
    (["--from", "PLAN", "--algorithm", "wfbp", "--emit", "ddp"], "exactly one of"),
    (["--from", "PLAN", "-o", "x.json"], "give --emit ddp"),
    (["--from", "PLAN", "--emit", "ddp", "--comm", COMM], "--comm plans"),
    (["--comm", COMM, "--algorithm", "wfbp"], "--output is required"),
])
def test_bad_combinations(tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str],
                          message: str) -> None:
    plan_path = tmp_path / "p.json"
    assert main([*BASE, "--comm", COMM, "--algorithm", "wfbp", "-o", str(plan_path)]) == 0
    capsys.readouterr()
    args = [str(plan_path) if a == "PLAN" else str(tmp_path / a) if a == "x.json" else a
            for a in extra]
    assert main([*BASE, *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["plan", "replay"])
def test_help_lists_the_planners(verb: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")
    for name in planner_names():
        assert name in text


def _column(path: str, name: str) -> list[str]:
    lines = Path(path).read_text().splitlines()
    index = lines[0].split(",").index(name)
    return [line.split(",")[index] for line in lines[1:]]


def test_replay_runs_ddp_list_and_the_ddp_knob(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    """``replay --algorithms ddp,ddp-list`` with ddp's knob set to ddp-list's caps: the
    same iteration time (the caps rebuild the same buckets)."""
    caps_path = tmp_path / "caps.json"
    assert main([*BASE, "--comm", COMM, "--algorithm", "ddp-list", "--emit", "ddp",
                 "-o", str(caps_path)]) == 0
    caps = json.loads(caps_path.read_text())["bucket_cap_mb_list"]
    out = tmp_path / "r.csv"
    assert main(["replay", "--compute", COMPUTE, "--comm", COMM, "--algorithms", "ddp,ddp-list",
                 "--knob", "ddp.bucket_cap_mb_list=" + ",".join(map(str, caps)),
                 "-o", str(out)]) == 0
    rows = dict(zip(_column(str(out), "algorithm"), _column(str(out), "iteration_s"),
                    strict=True))
    assert rows["ddp"] == rows["ddp-list"]
    assert _column(str(out), "n_collectives") == [str(len(caps))] * 2
