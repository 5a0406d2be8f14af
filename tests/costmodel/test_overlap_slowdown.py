"""The per-generation overlap slowdown: the physical prediction, the fit and its errors on
SYNTHETIC groups, the committed model's provenance, and which replays get it by default."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest

from gradsched.cli import main
from gradsched.costmodel.overlap_slowdown import (
    NONE,
    OverlapSource,
    fit_model,
    generation_of,
    load_model,
    measure_and_fit,
    parse_setting,
    physical_slowdown,
    resolve,
    weighted_median,
)
from gradsched.errors import ConfigError, InputError
from gradsched.traces.overlap_kernels import predicted_duration
from tests.robustness.option_probes import REPO
from tests.traces.test_overlap_kernels import synthetic_doc

GPU_TRACE = REPO / "traces/compute/h200/gpt2-s1024-b8-cuda-bf16.csv"
CPU_TRACE = REPO / "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"


def test_physical_slowdown_is_the_sm_share() -> None:
    """A kernel that fills the GPU loses the NCCL kernel's SMs; one that fits in the free
    SMs loses nothing; in between, the blocks that no longer fit."""
    assert physical_slowdown(216, 8, 108) == pytest.approx(108 / 100)
    assert physical_slowdown(50, 8, 108) == 1.0
    assert physical_slowdown(104, 8, 108) == pytest.approx(104 / 100)


def test_weighted_median() -> None:
    assert weighted_median([1.0, 2.0, 3.0], [1, 1, 10]) == 3.0
    assert weighted_median([3.0, 1.0, 2.0], [1, 1, 1]) == 2.0
    assert math.isnan(weighted_median([], []))


def groups(slowdown: float, n: int, role: str, generation: str = "A100") -> pd.DataFrame:
    """SYNTHETIC groups: fully overlapped kernels at a given slowdown."""
    return pd.DataFrame({"generation": generation, "role": role, "device": "SYNTHETIC A100",
                         "sm_count": 108, "grid_blocks": 216, "nccl_blocks": 8,
                         "reference_s": [1e-4] * n, "overlap_fraction": 1.0,
                         "overlapped_s": [predicted_duration(1e-4, 1.0, slowdown)] * n,
                         "slowdown": slowdown, "weight_s": 1e-4})


def test_fit_and_validation_errors_are_kept_apart() -> None:
    frame = pd.concat([groups(1.1, 3, "fit"), groups(1.21, 2, "validation")])
    model = fit_model(frame, [])
    entry = model["generations"]["A100"]
    assert entry["slowdown"] == 1.1
    assert entry["fit"]["error_fitted"] == 0.0
    assert entry["validation"]["error_fitted"] == pytest.approx(0.1 / 1.1 * 1.0, abs=1e-4)
    assert entry["validation"]["error_no_effect"] == pytest.approx(1 - 1 / 1.21, abs=1e-4)
    assert entry["physical_slowdown_full_gpu"] == 1.08
    assert set(model["borrowed"]) == {"H100", "H200", "GH200"}


def test_a_speedup_is_not_fitted_as_a_physical_effect() -> None:
    entry = fit_model(groups(0.9, 2, "fit"), [])["generations"]["A100"]
    assert entry["slowdown"] == 1.0 and entry["slowdown_raw"] == 0.9


def test_committed_model_records_its_fit_and_validation_traces() -> None:
    model = load_model()
    for gen in ("A100", "V100"):
        entry = model["generations"][gen]
        assert entry["slowdown"] >= 1.0
        roles = {s["role"] for s in entry["sources"]}
        assert roles == {"fit", "validation"}
        fitted = {(s["trace"], s["part"]) for s in entry["sources"] if s["role"] == "fit"}
        held = {(s["trace"], s["part"]) for s in entry["sources"] if s["role"] == "validation"}
        assert not fitted & held
        assert entry["validation"]["groups"] > 0


@pytest.mark.parametrize(("device", "generation"), [
    ("NVIDIA A100-PG509-200", "A100"), ("Tesla V100-SXM2-16GB", "V100"),
    ("cuda (NVIDIA H200)", "H200"), ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA Tesla K80", "K80"), ("cpu (AMD EPYC, 1 threads)", None)])
def test_generation_of(device: str, generation: str | None) -> None:
    assert generation_of(device) == generation


def test_the_default_follows_the_traces_device() -> None:
    model = load_model()
    a100 = resolve({"device": "NVIDIA A100 40GB"})
    assert a100.value == model["generations"]["A100"]["slowdown"] > 1.0
    assert "A100" in a100.note and "fitted on A100" in a100.note
    h200 = resolve({"device": "cuda (NVIDIA H200)"})
    assert h200.value == a100.value and "H200 unmeasured: the A100 value" in h200.note
    assert resolve({"device": "cpu (AMD EPYC, 1 threads)"}) == NONE
    k80 = resolve({"device": "NVIDIA Tesla K80"})
    assert k80.value == 1.0 and "none applied" in k80.note
    assert resolve({"device": "cuda (NVIDIA H200)"}, "off") == NONE
    assert resolve({"device": "cpu"}, 1.5).value == 1.5


@pytest.mark.parametrize("bad", ["0.5", "nan", "inf", "fast", "-1", ""])
def test_bad_settings_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="--overlap-slowdown must be auto, off or a number"):
        parse_setting(bad)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_replay_applies_the_default_to_gpu_traces_only(tmp_path, capsys) -> None:
    comm = ("--comm", "alpha-beta:alpha=1e-5,beta=1e-10", "--world-size", "8",
            "--algorithms", "wfbp", "--replay-iters", "2")
    code, _, err = run(capsys, "replay", "--compute", str(GPU_TRACE), *comm,
                       "-o", str(tmp_path / "auto.csv"))
    assert code == 0 and err.count("note: overlap slowdown 1.0") == 1 and "H200" in err
    run(capsys, "replay", "--compute", str(GPU_TRACE), *comm, "--overlap-slowdown", "off",
        "-o", str(tmp_path / "off.csv"))
    auto = pd.read_csv(tmp_path / "auto.csv")["iteration_s"].iloc[0]
    off = pd.read_csv(tmp_path / "off.csv")["iteration_s"].iloc[0]
    assert auto > off
    code, _, err = run(capsys, "replay", "--compute", str(CPU_TRACE), *comm,
                       "-o", str(tmp_path / "cpu.csv"))
    assert code == 0 and "overlap" not in err


def test_a_bad_value_is_one_line(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["shard", "compare", "--compute", str(GPU_TRACE), "--comm",
              "alpha-beta:alpha=1e-5,beta=1e-10", "--world-size", "8",
              "--overlap-slowdown", "0.5"])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("gradsched shard compare: error: argument --overlap-slowdown: "
                           "must be auto, off or a number in [1,")


def test_a_trace_of_another_generation_is_refused(tmp_path) -> None:
    path = tmp_path / "a100.json.gz"  # SYNTHETIC: its device is an A100
    path.write_bytes(gzip.compress(json.dumps(synthetic_doc()).encode()))
    _, model = measure_and_fit([OverlapSource("A100", "fit", "all", str(path))])
    assert model["generations"]["A100"]["slowdown"] == pytest.approx(1.2, abs=1e-4)
    assert model["generations"]["A100"]["validation"] is None
    with pytest.raises(InputError, match="is not a V100"):
        measure_and_fit([OverlapSource("V100", "fit", "all", str(path))])
