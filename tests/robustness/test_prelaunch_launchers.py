"""The pre-launch gate behind every launcher (the "launch" family), beyond ``run`` and
``shard run`` (:mod:`tests.robustness.test_prelaunch`): ``reexec run``, ``shard measure``,
``advise --sharded --validate``, and the torchrun environment of ``capture iteration`` and
``capture comm``. Each refusal: exit 2, one ``error:`` line naming the trace the plans are
made from (or the variable), no traceback, no output written, no rank started and no process
group joined. The compute traces here are SYNTHETIC (written below, made-up times).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gradsched.traces import ComputeTrace
from tests.robustness.refusal import one_line

ALPHA_BETA = "alpha-beta:alpha=1e-4,beta=1e-9"
LOOPBACK_P2 = Path(__file__).resolve().parents[2] / "traces/comm/cpu/gloo-loopback-p2.csv"
"""A committed gloo sweep (a re-execution case names a comm trace CSV)."""
SHADOW = "../../../etc/shadow"


def _trace(path: Path, names: list[str], numel: list[int]) -> Path:
    """A SYNTHETIC compute trace (made-up times) naming ``names``."""
    n = len(names)
    frame = pd.DataFrame({"name": names, "layer": [i // 2 for i in range(n)], "numel": numel,
                          "bytes": [4 * k for k in numel], "forward_s": 1e-4,
                          "backward_s": 2e-4, "update_s": 1e-5,
                          "ready_order": list(range(n))[::-1]})
    meta = {"kind": "compute", "model": "tiny-mlp", "batch_size": 4, "device": "cpu",
            "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
            "iterations": None, "date": "2026-11-28",
            "source": "SYNTHETIC test fixture, not measured"}
    ComputeTrace.from_frame(frame, meta).save(path)
    return path


def _model_trace(path: Path, model: str, rename: dict[str, str] | None = None) -> Path:
    """A SYNTHETIC trace of ``model``'s parameters (built on the meta device), some
    renamed."""
    from gradsched.runtime.coverage import model_parameters

    params = model_parameters(model, 4, None)
    names = [(rename or {}).get(name, name) for name in params]
    return _trace(path, names, list(params.values()))


def _shadow_trace(path: Path) -> Path:
    """tiny-mlp's trace with its first layer renamed ``../../../etc/shadow`` (weight) and
    ``../../../etc/shadow.bias``: one layer, one block, as a sharded planner needs."""
    return _model_trace(path, "tiny-mlp", {"0.weight": SHADOW, "0.bias": SHADOW + ".bias"})


TRACES = {"another-model": lambda p: _model_trace(p / "tiny-cnn.csv", "tiny-cnn"),
          "shadow": lambda p: _shadow_trace(p / "shadow.csv")}
"""The bad inputs: a trace of another model (tiny-cnn's layers), and one naming a path."""


def _names_the_input(line: str, trace: Path, bad: str) -> None:
    assert str(trace) in line, line
    assert (SHADOW in line) if bad == "shadow" else ("tiny-mlp" in line), line


# --------------------------------------------------------------------------- plans


@pytest.mark.parametrize("bad", sorted(TRACES))
def test_reexec_run_checks_every_case_before_the_first_starts(
        bad: str, tmp_path: Path, no_ranks: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A good case first, then one whose trace does not fit its model: nothing runs."""
    good = _model_trace(tmp_path / "tiny-mlp.csv", "tiny-mlp")
    trace = TRACES[bad](tmp_path)
    config = tmp_path / "reexec.yaml"
    case = "{{model: tiny-mlp, batch_size: 4, world_size: 2, network: loopback, " \
        "compute: {trace}, comm: " + str(LOOPBACK_P2) + ", name: {name}}}"
    config.write_text(
        "reexec:\n  settings: {algorithms: [wfbp], ddp_bucket_cap_mb: [25], iters: 2,\n"
        "             rounds: 1, warmup: 1}\n  cases:\n"
        f"    - {case.format(trace=good, name='good')}\n"
        f"    - {case.format(trace=trace, name='bad')}\n", encoding="utf-8")
    out = tmp_path / "out"
    line = one_line(["reexec", "run", "--config", str(config), "--allow-load", "-o",
                      str(out)], capsys)
    _names_the_input(line, trace, bad)
    assert "case bad" in line
    assert no_ranks == []
    assert not out.exists()


@pytest.mark.parametrize("bad", sorted(TRACES))
def test_shard_measure_checks_its_plans_before_launch(
        bad: str, tmp_path: Path, no_ranks: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    trace = TRACES[bad](tmp_path)
    out = tmp_path / "measured"
    line = one_line(["shard", "measure", "--model", "tiny-mlp", "--batch-size", "4",
                      "--world-size", "2", "--network", "loopback", "--compute", str(trace),
                      "--comm", ALPHA_BETA, "--algorithms", "fsdp2", "--rounds", "1",
                      "-o", str(out)], capsys)
    _names_the_input(line, trace, bad)
    assert no_ranks == []
    assert not out.exists()


@pytest.mark.parametrize("bad", sorted(TRACES))
def test_advise_sharded_validate_checks_its_plans_before_launch(
        bad: str, tmp_path: Path, no_ranks: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    trace = TRACES[bad](tmp_path)
    plan_out, advice = tmp_path / "plan.json", tmp_path / "advice.json"
    line = one_line(["advise", "--sharded", "--compute", str(trace), "--comm", ALPHA_BETA,
                      "--world-size", "2", "--validate", "--model", "tiny-mlp",
                      "--batch-size", "4", "--rounds", "1", "--plan-out", str(plan_out),
                      "--json", str(advice)], capsys)
    _names_the_input(line, trace, bad)
    assert no_ranks == []
    assert not plan_out.exists() and not advice.exists()


# --------------------------------------------------------------------------- torchrun

GOOD_ENV = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29512"}
BAD_ENVS = [({"RANK": "abc"}, "$RANK"), ({"RANK": "2"}, "$RANK"),
            ({"WORLD_SIZE": "0"}, "$WORLD_SIZE"), ({"MASTER_PORT": "0"}, "$MASTER_PORT"),
            ({"MASTER_ADDR": "no-such-host.invalid"}, "$MASTER_ADDR")]
ENV_IDS = [",".join(f"{k}={v}" for k, v in bad.items()) for bad, _ in BAD_ENVS]


def _capture_argv(what: str, tmp_path: Path) -> tuple[list[str], Path]:
    if what == "comm":
        out = tmp_path / "sweep.csv"
        return ["capture", "comm", "--torchrun", "--collectives", "all_reduce",
                "--max-bytes", "4K", "-o", str(out)], out
    out = tmp_path / "profiled"
    return ["capture", "iteration", "--torchrun", "--model", "tiny-mlp", "--batch-size", "2",
            "--iters", "1", "-o", str(out)], out


@pytest.mark.parametrize("what", ["comm", "iteration"])
@pytest.mark.parametrize("bad,variable", BAD_ENVS, ids=ENV_IDS)
def test_capture_checks_the_torchrun_environment_before_init(
        what: str, bad: dict[str, str], variable: str, tmp_path: Path, no_ranks: list[str],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in {**GOOD_ENV, **bad}.items():
        monkeypatch.setenv(key, value)
    argv, out = _capture_argv(what, tmp_path)
    line = one_line(argv, capsys)
    assert variable in line, line
    assert no_ranks == []
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("what", ["comm", "iteration"])
def test_capture_world_size_must_be_torchruns(
        what: str, tmp_path: Path, no_ranks: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Under torchrun a --world-size other than WORLD_SIZE is refused, not ignored."""
    for key, value in GOOD_ENV.items():
        monkeypatch.setenv(key, value)
    argv, out = _capture_argv(what, tmp_path)
    line = one_line([*argv, "--world-size", "3"], capsys)
    assert "--world-size 3" in line and "WORLD_SIZE=2" in line, line
    assert no_ranks == [] and not out.exists()


def test_the_fixture_plans_fit_their_model(tmp_path: Path) -> None:
    """The good trace above passes the gate, every kind of re-execution plan made from it
    (ZeRO-1's and stock DDP's too): the refusals are the bad inputs'."""
    from gradsched.reexec import config as reexec_config
    from gradsched.reexec.run import case_plans_for, executor_buffer_bytes
    from gradsched.runtime.prelaunch import check_plans

    good = _model_trace(tmp_path / "tiny-mlp.csv", "tiny-mlp")
    case = reexec_config.Case("c", "tiny-mlp", 4, 2, "loopback", str(good), str(LOOPBACK_P2),
                              zero1=("plain",))
    settings = reexec_config.Settings(algorithms=("wfbp", "best"), ddp_bucket_cap_mb=(25.0,),
                                      ddp_bucket_cap_mb_list_from=("contiguous_optimum",))
    plans = case_plans_for(case, settings)
    assert {"wfbp", "best", "ddp-native-25", "zero1"} <= set(plans.plans)
    numel = check_plans([(str(good), plan) for plan in plans.plans.values()],
                        model="tiny-mlp", batch_size=4, seq_len=None)
    assert len(numel) == 6
    assert executor_buffer_bytes(case, plans, numel) >= 4 * sum(numel.values())
