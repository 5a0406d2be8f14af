"""``gradsched advise``: tuned DDP vs the gradsched plan, end to end.

The advice is tested on committed inputs (ResNet-18 and BERT-base CPU compute traces, the
committed gloo sweeps); ``--validate`` on the tiny MLP (a compute trace captured in the
test, 2 gloo ranks on loopback). Synthetic numbers are labelled as such: the unit test of
the speedups' bootstrap, and the slowed-down tiny-MLP trace with an inline alpha-beta network on
which the per-bucket caps are predicted to win (the measured times are real).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel.base import load_comm_spec
from gradsched.experiments.margin import DEFAULT_MARGIN_PCT
from gradsched.experiments.recommend import (
    DEFAULT_CAPS_MB,
    RECOMMENDATION_NAMES,
    decide,
)
from gradsched.planners import make_plan
from gradsched.replay.engine import ReplayOptions, replay
from gradsched.traces.bundle import ComputeTrace

REPO = Path(__file__).resolve().parents[1]
R18 = REPO / "traces/compute/cpu/resnet18-b16-cpu-fp32.csv"
BERT = REPO / "traces/compute/cpu/bert-base-s128-b2-cpu-fp32.csv"
LOOP2 = REPO / "traces/comm/cpu/gloo-loopback-p2.csv"
LOOP3 = REPO / "traces/comm/cpu/gloo-loopback-p3.csv"
TBF100 = REPO / "traces/comm/cpu/gloo-tbf100mbit-p2.csv"


def _advise(tmp_path: Path, *extra: str, compute: Path = R18, comm: Path | str = LOOP2
            ) -> dict:
    out = tmp_path / "advice.json"
    code = main(["advise", "--compute", str(compute), "--comm", str(comm), "--json", str(out),
                 *extra])
    assert code == 0
    return json.loads(out.read_text())


# --------------------------------------------------------------------------- the advice
def test_resnet18_loopback_tunes_ddp_by_replay(tmp_path: Path, capsys) -> None:
    advice = _advise(tmp_path)
    text = capsys.readouterr().out
    assert "RECOMMENDATION" in text and "margin: 5 %" in text
    sweep = advice["ddp"]["sweep"]
    assert [p["bucket_cap_mb"] for p in sweep] == [None, *map(float, DEFAULT_CAPS_MB)]
    # every point is the replay of the ddp planner at that cap (recomputed here)
    trace, model = ComputeTrace.load(R18), load_comm_spec(str(LOOP2))
    options = ReplayOptions(iterations=5, issue="executor")
    for point in sweep:
        knobs = {} if point["bucket_cap_mb"] is None else {"bucket_cap_mb":
                                                            point["bucket_cap_mb"]}
        plan = make_plan("ddp", trace, model, 2, knobs)
        assert point["iteration_s"] == pytest.approx(
            replay(trace, plan, model, 2, options).iteration_s, rel=1e-12)
        assert point["n_buckets"] == plan.n_buckets
    # torch 2.14: the default has a 1 MiB first bucket, an explicit cap is the first's cap
    assert sweep[0]["first_bucket_mb"] == 1.0
    assert all(p["first_bucket_mb"] == p["bucket_cap_mb"] for p in sweep[1:])
    best = advice["ddp"]["best"]
    assert best["iteration_s"] == min(p["iteration_s"] for p in sweep)
    assert advice["ddp"]["current"] == sweep[0]
    plan, listed = advice["plan"], advice["ddp"]["list"]
    tuned = min(best["iteration_s"], listed["iteration_s"])
    gain = 100 * (tuned / plan["iteration_s"] - 1)
    assert plan["gain_over_tuned_ddp_pct"] == pytest.approx(gain)
    assert plan["gain_band_pct"]["low"] == pytest.approx(gain - DEFAULT_MARGIN_PCT)
    assert advice["margin_pct"] == DEFAULT_MARGIN_PCT
    assert "measured sweep" in advice["margin_source"]
    choice = decide(sweep[0]["iteration_s"], best["iteration_s"], listed["iteration_s"],
                    plan["iteration_s"], DEFAULT_MARGIN_PCT)
    assert advice["recommendation"] == RECOMMENDATION_NAMES[choice]
    assert advice["world_size"] == 2 and advice["model"] == "resnet18"
    # the list is the contiguous optimum's buckets, in ready order
    assert listed["n_buckets"] == len(listed["bucket_cap_mb_list"])
    assert "bucket_cap_mb_list=" in listed["paste_line"]


def test_keep_your_setting_below_the_margin(tmp_path: Path, capsys) -> None:
    """ResNet-18 over loopback: the best uniform cap is predicted within the 5 % margin of
    torch's default, so the advice is to keep it (never a change for a +0.x % gain)."""
    advice = _advise(tmp_path)
    text = capsys.readouterr().out
    gain = advice["ddp"]["tuned_gain_pct"]
    assert 0 <= gain < DEFAULT_MARGIN_PCT
    assert advice["recommendation"] == "keep-current"
    assert "RECOMMENDATION: keep your setting: DistributedDataParallel(model)" in text
    assert "band" in text and "not a statistical confidence interval" in text


def test_current_setting_is_the_baseline(tmp_path: Path, capsys) -> None:
    """--current-bucket-cap-mb: the user's cap (added to the sweep) is what a change must
    beat by more than the margin."""
    advice = _advise(tmp_path, "--current-bucket-cap-mb", "300", "--margin-pct", "0.1")
    text = capsys.readouterr().out
    current = advice["ddp"]["current"]
    assert current["bucket_cap_mb"] == 300.0
    assert current in advice["ddp"]["sweep"]
    assert advice["ddp"]["tuned_gain_pct"] == pytest.approx(
        100 * (current["iteration_s"] / advice["ddp"]["best"]["iteration_s"] - 1))
    assert "your setting: bucket_cap_mb=300" in text


def test_recommended_plan_and_its_command(tmp_path: Path, capsys) -> None:
    """A plan that beats tuned DDP by more than the margin is recommended; the printed
    ``gradsched plan`` command rebuilds the very plan ``--plan-out`` wrote."""
    written = tmp_path / "plan.json"
    advice = _advise(tmp_path, "--margin-pct", "1", "--plan-out", str(written),
                     compute=BERT, comm=TBF100)
    text = capsys.readouterr().out
    assert advice["margin_source"] == "--margin-pct" and advice["margin_pct"] == 1.0
    assert advice["plan"]["gain_over_tuned_ddp_pct"] > 1.0
    assert advice["recommendation"] == "gradsched-plan"
    # the plan beats the better of the uniform cap and the per-bucket list
    tuned = min(advice["ddp"]["best"]["iteration_s"], advice["ddp"]["list"]["iteration_s"])
    assert advice["plan"]["iteration_s"] * 1.01 < tuned
    assert "RECOMMENDATION: run the gradsched plan" in text
    line = next(ln for ln in text.splitlines() if "make the plan:" in ln)
    argv = line.split("make the plan:")[1].split("(or take")[0].split()
    assert argv[:2] == ["gradsched", "plan"]
    rebuilt = tmp_path / "rebuilt.json"
    argv[argv.index("-o") + 1] = str(rebuilt)
    assert main(argv[1:]) == 0
    assert rebuilt.read_bytes() == written.read_bytes()
    run_line = next(ln for ln in text.splitlines() if "time it against tuned DDP" in ln)
    assert "gradsched run --plan" in run_line and "--model bert-base" in run_line
    assert "--seq-len 128" in run_line


def test_margin_is_the_fits_heldout_error(tmp_path: Path) -> None:
    """A fitted model JSON carries its held-out MAPE per collective (gradsched fit -o);
    the margin is the largest over the collectives DDP and the plan use."""
    model_json = tmp_path / "loop2.interp.json"
    assert main(["fit", str(LOOP2), "--model", "interp", "-o", str(model_json)]) == 0
    meta = json.loads(model_json.read_text())["meta"]
    held = meta["heldout_mape_pct"]
    assert set(held) == {"all_reduce", "all_gather", "broadcast", "reduce_scatter"}
    advice = _advise(tmp_path, comm=model_json)
    used = {"all_reduce"}
    if any(b["collective"] == "rs_ag" for b in advice["plan"]["plan"]["buckets"]):
        used |= {"reduce_scatter", "all_gather"}
    assert advice["margin_pct"] == pytest.approx(max(held[c] for c in used))
    assert "held-out MAPE" in advice["margin_source"]
    # a model JSON without it falls back to the default, and says so
    data = json.loads(model_json.read_text())
    del data["meta"]["heldout_mape_pct"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    advice = _advise(tmp_path, comm=bare)
    assert advice["margin_pct"] == DEFAULT_MARGIN_PCT
    assert "states no held-out error" in advice["margin_source"]


def test_speedups_are_the_reexecutions_bootstrap_within_rounds() -> None:
    """SYNTHETIC iteration times (labelled): the list is clearly faster than the current
    setting; the interval is the re-execution's (resampled within rounds, seeded)."""
    pytest.importorskip("torch")
    from gradsched.reexec.uncertainty import bootstrap_medians, ratio_interval
    from gradsched.reexec.validate import CASE, speedups

    rng = np.random.default_rng(1)

    def rows(bases: dict[str, float]) -> pd.DataFrame:
        return pd.DataFrame([{"item": kind, "round": r, "iteration_s": base + 0.01 *
                              rng.standard_normal()} for kind, base in bases.items()
                             for r in range(3) for _ in range(10)])

    clear = rows({"current": 1.2, "list": 1.0})
    point, low, high = speedups(clear, ["list", "current"])["list_over_current"]
    median = clear.groupby("item")["iteration_s"].median()
    assert point == pytest.approx(median["current"] / median["list"])
    assert 1.0 < low <= point <= high
    reps = bootstrap_medians(clear.assign(case=CASE), CASE, ["list", "current"])
    assert (point, low, high) == ratio_interval(reps, "current", "list")  # one bootstrap
    assert speedups(clear, ["list", "current"])["list_over_current"] == (point, low, high)
    # overlapping samples: the interval includes 1
    _, low, high = speedups(rows({"current": 1.0, "list": 1.0}),
                            ["list", "current"])["list_over_current"]
    assert low < 1.0 < high


# --------------------------------------------------------------------------- bad input
def _fails(capsys, argv: list[str], *needles: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err


def test_world_size_not_in_the_sweep(capsys) -> None:
    _fails(capsys, ["advise", "--compute", str(R18), "--comm", str(LOOP2), "--world-size", "4"],
           str(LOOP2), "holds world sizes 2, not --world-size 4")


def test_trace_captured_at_another_world_size(tmp_path: Path, capsys) -> None:
    trace = tmp_path / "r18-p2.csv"
    shutil.copy(R18, trace)
    meta = json.loads(R18.with_suffix(".meta.json").read_text())
    meta["world_size"] = 2
    trace.with_suffix(".meta.json").write_text(json.dumps(meta))
    _fails(capsys, ["advise", "--compute", str(trace), "--comm", str(LOOP3)],
           "r18-p2.meta.json", "world_size", "captured in a 2-rank job", "for 3 ranks")
    # the same trace with a sweep at its own world size is fine
    assert main(["advise", "--compute", str(trace), "--comm", str(LOOP2)]) == 0


def test_empty_trace(tmp_path: Path, capsys) -> None:
    trace = tmp_path / "empty.csv"
    trace.write_text(R18.read_text().splitlines()[0] + "\n")
    shutil.copy(R18.with_suffix(".meta.json"), trace.with_suffix(".meta.json"))
    _fails(capsys, ["advise", "--compute", str(trace), "--comm", str(LOOP2)],
           "empty.csv", "no data rows")
    trace.write_text("")
    _fails(capsys, ["advise", "--compute", str(trace), "--comm", str(LOOP2)], "empty.csv")


def test_missing_files(tmp_path: Path, capsys) -> None:
    _fails(capsys, ["advise", "--compute", str(tmp_path / "no.csv"), "--comm", str(LOOP2)],
           "no.csv", "not found")
    _fails(capsys, ["advise", "--compute", str(R18), "--comm", str(tmp_path / "no.json")],
           "no.json", "not found")


def test_bad_options(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["advise", "--compute", str(R18), "--comm", str(LOOP2), "--caps", "1,-2"])
    assert exc.value.code == 2
    assert "bucket caps must be numbers > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["advise", "--compute", str(R18), "--comm", str(LOOP2), "--margin-pct", "-1"])
    assert exc.value.code == 2
    assert "--margin-pct" in capsys.readouterr().err


# --------------------------------------------------------------------------- --validate


@pytest.fixture(scope="module")
def slow_tiny_trace(tiny_mlp_trace: Path, tmp_path_factory) -> Path:
    """SYNTHETIC (labelled): the tiny MLP's trace with every time x 1000, so that on the
    inline alpha-beta network :data:`SLOW_NET` overlap matters and the per-bucket caps
    (5 buckets) are predicted to beat every uniform cap (one bucket: the model is 100 kB)."""
    out = tmp_path_factory.mktemp("slow") / "tiny-mlp-slow.csv"
    lines = tiny_mlp_trace.read_text().splitlines()
    header = lines[0].split(",")
    timed = [i for i, c in enumerate(header) if c.endswith("_s")]
    rows = []
    for line in lines[1:]:
        cells = line.split(",")
        for i in timed:
            cells[i] = repr(float(cells[i]) * 1000)
        rows.append(",".join(cells))
    out.write_text("\n".join([lines[0], *rows]) + "\n")
    meta = json.loads(tiny_mlp_trace.with_suffix(".meta.json").read_text())
    meta.update({k: v * 1000 for k, v in meta.items()
                 if k.endswith("_s") and isinstance(v, int | float)})
    out.with_suffix(".meta.json").write_text(json.dumps(meta))
    return out


SLOW_NET = "alpha-beta:alpha=1e-3,beta=3e-7"  # synthetic network (labelled)


def test_validate_runs_the_list_for_real(slow_tiny_trace: Path, tmp_path: Path,
                                         capsys) -> None:
    out = tmp_path / "advice.json"
    code = main(["advise", "--compute", str(slow_tiny_trace), "--comm", SLOW_NET,
                 "--world-size", "2", "--margin-pct", "1", "--json", str(out), "--validate",
                 "--rounds", "1", "--iters", "3", "--warmup", "1", "--timeout-s", "60"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    advice = json.loads(out.read_text())
    text = captured.out
    listed = advice["ddp"]["list"]
    assert advice["recommendation"] == "ddp-bucket-cap-mb-list"
    assert listed["gain_over_best_uniform_pct"]["point"] > 1.0
    assert "RECOMMENDATION: per-bucket caps, " + str(listed["n_buckets"]) + " buckets" in text
    assert listed["paste_line"] in text
    assert "DistributedDataParallel(model, bucket_cap_mb_list=[" in listed["paste_line"]
    val = advice["validation"]
    assert val["model"] == "tiny-mlp" and val["batch_size"] == 4
    times = val["iteration_s"]
    # torch's default is also the best uniform cap here (one bucket), so it runs once
    assert set(times) == {"list", "current"}
    assert all(len(v) == 3 and min(v) > 0 for v in times.values())
    assert val["rebuilt_buckets_match"] is True
    assert f"DDP rebuilt exactly the {listed['n_buckets']} buckets of the caps" in text
    speed = val["speedups"]["list_over_current"]
    assert speed["point"] == pytest.approx(np.median(times["current"])
                                           / np.median(times["list"]))
    assert 0 < speed["low"] <= speed["high"]
    assert "95 % bootstrap interval" in text
    # the machine's load is recorded and a loaded machine is flagged
    assert val["cpus"] >= 1 and val["load_avg_1m_before"] >= 0
    assert val["loaded"] == (val["load_avg_1m_before"] > val["cpus"])
    assert ("warning: the machine was loaded" in text) == val["loaded"]


def test_validate_refuses_another_model(tiny_mlp_trace: Path, tmp_path: Path,
                                        capsys) -> None:
    """Refused before any rank starts, and the plan --plan-out names is not written: the
    outputs come after the validation, all or none."""
    pytest.importorskip("torch")
    trace = str(tiny_mlp_trace)
    plan_out = tmp_path / "plan.json"
    _fails(capsys, ["advise", "--compute", trace, "--comm", str(LOOP2), "--validate",
                    "--model", "tiny-cnn", "--plan-out", str(plan_out)], trace,
           "not model 'tiny-cnn''s parameters")
    assert not plan_out.exists()


def test_validate_names_the_first_mismatched_tensor(tiny_mlp_trace: Path, tmp_path: Path,
                                                    capsys) -> None:
    """A trace whose tensor names are not the model's: refused before any rank starts,
    naming the first missing and extra name and the trace file."""
    bad = tmp_path / "renamed.csv"
    bad.write_text(tiny_mlp_trace.read_text().replace("2.weight,", "2.kernel,"))
    shutil.copy(tiny_mlp_trace.with_suffix(".meta.json"), bad.with_suffix(".meta.json"))
    _fails(capsys, ["advise", "--compute", str(bad), "--comm", str(LOOP2), "--validate"],
           str(bad), "first: '2.weight'", "first: '2.kernel'")


def test_help_is_plain_text(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    text = capsys.readouterr().out
    for markup in (":mod:", ":func:", ":class:", ":data:", "``", "**"):
        assert markup not in text, markup
    assert "bucket_cap_mb_list" in text and "keep your setting" in text
