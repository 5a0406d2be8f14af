"""The straggler model (gradsched.costmodel.stragglers): e_P against Harter's table, the
setting's checks, and the compute stretch on a synthetic, labelled trace replayed by the DDP
and the sharded replay."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.costmodel.stragglers import (
    MEASURED,
    Stragglers,
    apply_stragglers,
    expected_max_normal,
    parse_stragglers,
    resolve_stragglers,
)
from gradsched.errors import ConfigError
from gradsched.experiments import make_plan
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay import ReplayOptions, replay
from gradsched.replay.sharded import replay_sharded
from gradsched.traces.bundle import ComputeTrace

HARTER = {2: 0.5642, 3: 0.8463, 4: 1.0294, 5: 1.1630, 8: 1.4236, 10: 1.5388, 20: 1.8675,
          50: 2.2491, 100: 2.5076, 1000: 3.2414}
"""Expected largest of n standard normals, four decimals: H. L. Harter, Biometrika 48 (1961),
Table 1 (also David & Nagaraja, Order Statistics, 3rd ed., 2003)."""


def _synthetic(device: str = "cuda (synthetic)", **meta: object) -> ComputeTrace:
    """Synthetic (not a measurement): 6 layers, 1 ms forward and 2 ms backward each,
    1 MB gradients."""
    n = 6
    frame = pd.DataFrame({"name": [f"l{i}.weight" for i in range(n)], "layer": range(n),
                          "numel": [250_000] * n, "bytes": [1_000_000] * n,
                          "forward_s": [1e-3] * n, "backward_s": [2e-3] * n,
                          "ready_order": list(range(n))[::-1], "update_s": [1e-5] * n})
    base = {"kind": "compute", "model": "synthetic-stragglers", "batch_size": 1,
            "device": device, "dtype": "fp32", "world_size": 1, "software": {},
            "capture_method": "synthetic", "iterations": 1, "date": "2026-12-07",
            "source": "synthetic: uniform layers for the straggler tests"}
    return ComputeTrace.from_frame(frame, {**base, **meta})


@pytest.mark.parametrize(("p", "expected"), sorted(HARTER.items()))
def test_expected_maximum_matches_harters_table(p: int, expected: float) -> None:
    assert expected_max_normal(p) == pytest.approx(expected, abs=6e-5)


def test_expected_maximum_is_monotone_and_below_its_asymptote() -> None:
    sizes = [1, 2, 3, 8, 16, 64, 128, 512, 1024, 4096, 65536]
    values = [expected_max_normal(p) for p in sizes]
    assert values[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(values))
    assert all(v < math.sqrt(2 * math.log(p)) for p, v in zip(sizes[1:], values[1:],
                                                               strict=True))
    assert 3.2 < expected_max_normal(1024) < 3.3


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, 1 << 40])
def test_expected_maximum_refuses_bad_rank_counts(bad: object) -> None:
    with pytest.raises(ConfigError, match="number of ranks"):
        expected_max_normal(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "on", "nan", "-0.1", "0.6", "1e9", "inf"])
def test_bad_option_values_are_refused_in_one_line(bad: str) -> None:
    with pytest.raises(ConfigError, match="expected off, auto or a coefficient") as exc:
        parse_stragglers(bad)
    assert "\n" not in str(exc.value)


def test_option_values() -> None:
    assert parse_stragglers("off") == "off" and parse_stragglers(" AUTO ") == "auto"
    assert parse_stragglers("0.05") == 0.05
    trace = _synthetic()
    assert resolve_stragglers("off", trace, 64) is None
    auto = resolve_stragglers("auto", trace, 64)
    assert auto is not None and auto.cv == MEASURED["gpu-bound"].cv
    hb = _synthetic(cpu_bound=True)
    assert resolve_stragglers("auto", hb, 64).cv == MEASURED["host-bound"].cv  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="one rank"):
        resolve_stragglers(0.1, trace, 1)
    with pytest.raises(ConfigError, match="no straggler measurement for a 'cpu'"):
        resolve_stragglers("auto", _synthetic(device="cpu"), 8)
    with pytest.raises(ConfigError, match="outside"):
        Stragglers(0.7, "test")


def test_zero_cv_leaves_the_trace_untouched() -> None:
    trace = _synthetic()
    assert apply_stragglers(trace, Stragglers(0.0, "test"), 64) is trace
    assert apply_stragglers(trace, None, 64) is trace
    assert apply_stragglers(trace, Stragglers(0.2, "test"), 1) is trace


def test_zero_cv_replay_is_byte_identical(tmp_path) -> None:
    from gradsched import cli

    src = "traces/compute/h200/resnet50-b64-cuda-fp32.csv"
    base = ["replay", "--compute", src, "--comm", "alpha-beta:alpha=1e-5,beta=1e-10",
            "--world-size", "8", "--algorithms", "ddp,wfbp", "--replay-iters", "2"]
    assert cli.main([*base, "-o", str(tmp_path / "a.csv")]) == 0
    assert cli.main([*base, "-o", str(tmp_path / "b.csv"), "--stragglers", "0"]) == 0
    assert cli.main([*base, "-o", str(tmp_path / "c.csv"), "--stragglers", "0.05"]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "c.csv").read_bytes()


@pytest.mark.parametrize("world", [8, 64, 1024])
def test_ddp_step_grows_as_e_p_predicts(world: int) -> None:
    # communication nearly free: the step is compute, so it stretches by 1 + cv e_P
    trace = _synthetic()
    model = AlphaBetaModel(1e-9, 1e-15)
    setting = Stragglers(0.05, "test")
    plan = make_plan("ddp", trace, model, world)
    options = ReplayOptions(iterations=3)
    base = replay(trace, plan, model, world, options).iteration_s
    slow = replay(apply_stragglers(trace, setting, world), plan, model, world,
                  options).iteration_s
    assert slow / base == pytest.approx(1 + 0.05 * expected_max_normal(world), rel=1e-4)


def test_sharded_step_grows_as_e_p_predicts_and_with_p() -> None:
    trace = _synthetic()
    model = AlphaBetaModel(1e-9, 1e-15)
    setting = Stragglers(0.05, "test")
    ratios = []
    for world in (2, 8, 64, 1024):
        plan = make_sharded_plan("fsdp2", trace, model, world)
        base = replay_sharded(trace, plan, model, world).iteration_s
        slow = replay_sharded(apply_stragglers(trace, setting, world), plan, model,
                              world).iteration_s
        assert slow / base == pytest.approx(setting.factor(world), rel=1e-3)
        ratios.append(slow / base)
    assert ratios == sorted(ratios) and ratios[0] < ratios[-1]


def test_stretch_records_the_setting_and_scales_every_time_column() -> None:
    trace = _synthetic()
    out = apply_stragglers(trace, Stragglers(0.1, "test"), 8)
    factor = 1 + 0.1 * expected_max_normal(8)
    assert out.frame["backward_s"].tolist() == pytest.approx([2e-3 * factor] * 6)
    assert out.frame["update_s"].tolist() == pytest.approx([1e-5 * factor] * 6)
    assert out.frame["bytes"].tolist() == trace.frame["bytes"].tolist()
    assert out.meta["stragglers"]["factor"] == pytest.approx(factor, abs=1e-6)
    assert "stragglers" not in trace.meta  # the input is not changed


def test_the_commands_say_what_they_applied(tmp_path, capsys) -> None:
    from gradsched import cli

    src = "traces/compute/h200/bert-base-s128-b32-cuda-bf16-corrected.csv"  # host-bound
    code = cli.main(["shard", "compare", "--compute", src, "--comm",
                     "alpha-beta:alpha=1e-5,beta=1e-10", "--world-size", "64",
                     "--stragglers", "auto"])
    assert code == 0
    err = capsys.readouterr().err
    factor = 1 + MEASURED["host-bound"].cv * expected_max_normal(64)
    assert f"note: stragglers: compute stretched x{factor:.4f}" in err
    assert "auto, host-bound" in err


def test_device_class_is_the_one_host_bound_definition() -> None:
    """The importer's verdict (``cpu_bound``, or a capture's ``host_bound`` record); the
    hook overhead is no second rule."""
    from gradsched.costmodel.stragglers import device_class
    from gradsched.traces.host_bound import record

    assert device_class(_synthetic())[0] == "gpu-bound"
    assert device_class(_synthetic(capture_overhead=0.2))[0] == "gpu-bound"
    assert device_class(_synthetic(cpu_bound=True))[0] == "host-bound"
    assert device_class(_synthetic(capture_overhead=0.2,
                                   host_bound=record(0.97, "synthetic")))[0] == "gpu-bound"
    assert device_class(_synthetic(host_bound=record(0.5, "synthetic")))[0] == "host-bound"
    assert device_class(_synthetic(device="cpu (AMD EPYC)"))[0] is None
