"""The at-scale study (gradsched.experiments.at_scale): the points loader refuses bad rows,
the calibration reads only the smallest point, the growth arithmetic, and an end-to-end
run on two small groups.

The CSVs written here are synthetic (labelled so in their ``source``); the shapes are the
published MPT-125M one (llm-foundry), so the parameter check passes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gradsched.errors import ConfigError, InputError
from gradsched.experiments.at_scale.growth import explained, growth, pooled
from gradsched.experiments.at_scale.points import COLUMNS, load_points
from gradsched.experiments.at_scale.predict import base_trace, calibrate_mfu
from gradsched.experiments.at_scale.settings import AtScaleSettings, CommChoice
from gradsched.experiments.at_scale.study import groups_frame, run, summary

REPO = Path(__file__).resolve().parents[2]
AB = "alpha-beta:alpha=2e-5,beta=4e-11"
MPT125 = {"model": "mpt-125m", "layout": "gpt", "n_layers": 12, "d_model": 768, "n_heads": 12,
          "n_kv_heads": 12, "ffn": 3072, "vocab": 50368, "positions": 2048,
          "params_published": 125311488, "seq_len": 2048, "gpu": "a100",
          "gpu_memory_gb": 40, "interconnect": "synthetic", "precision": "bf16",
          "sharding": "full_shard",
          "activation_checkpointing": "none", "reduce_dtype": "bf16",
          "grad_sync": "last_micro_batch", "notes": "synthetic test row"}


def row(group: str, gpus: int, step: float | str, **change: object) -> dict[str, object]:
    out = {"source": "synthetic", "group": group, **MPT125, "micro_batch": 4,
           "grad_accum": 1, "global_batch": 4 * gpus, "gpus": gpus,
           "tokens_per_s_per_gpu": "", "step_s": step}
    out.update(change)
    return out


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    lines = [",".join(COLUMNS)] + [",".join(str(r[c]) for c in COLUMNS) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def settings(**change: object) -> AtScaleSettings:
    return AtScaleSettings(comm=(CommChoice("a100", AB, "synthetic-ab"),), **change)


GOOD = [row("g1", 8, 0.5), row("g1", 16, 0.52), row("g1", 32, 0.55),
        row("g2", 16, 0.6, micro_batch=2, global_batch=32), row("g2", 64, 0.64, micro_batch=2,
                                                                  global_batch=128)]


@pytest.mark.parametrize(("change", "field", "row_no"), [
    ({"n_layers": "x"}, "n_layers", 2),
    ({"global_batch": 999}, "global_batch", 2),
    ({"params_published": 2e8}, "params_published", 2),
    ({"gpu": "tpu"}, "gpu", 2),
    ({"step_s": "-1"}, "step_s", 2),
    ({"tokens_per_s_per_gpu": 100}, "step_s", 2),  # both given
    ({"layout": "bert"}, "layout", 2),
    ({"seq_len": 1024}, "seq_len", 2),  # differs from the group's first row
    ({"reduce_dtype": "fp16"}, "reduce_dtype", 2),
    ({"grad_sync": "sometimes"}, "grad_sync", 2),
])
def test_loader_refuses_bad_rows_naming_file_row_field(tmp_path, change, field, row_no) -> None:
    rows = [dict(r) for r in GOOD]
    rows[row_no - 1].update(change)
    path = write(tmp_path / "points.csv", rows)
    with pytest.raises(InputError) as caught:
        load_points(path)
    error = caught.value
    assert (error.path, error.row, error.field) == (str(path), row_no, field), str(error)


def test_loader_refuses_a_group_of_one_and_reads_the_committed_points(tmp_path) -> None:
    with pytest.raises(InputError, match="one GPU count") as caught:
        load_points(write(tmp_path / "p.csv", GOOD[:3] + GOOD[3:4]))
    assert caught.value.field == "group"
    points = load_points(REPO / "data/external/at-scale/points.csv")
    assert len(points) == 102 and len({p.group for p in points}) == 35


def test_step_from_throughput_is_tokens_per_gpu_over_rate(tmp_path) -> None:
    rows = [row("g", 8, "", tokens_per_s_per_gpu=8192), row("g", 16, 0.5)]
    first = load_points(write(tmp_path / "p.csv", rows))[0]
    assert first.published_step_s == pytest.approx(4 * 2048 / 8192)


def test_calibration_uses_only_the_smallest_point(tmp_path) -> None:
    """Perturbing a larger point's published step changes nothing calibrated."""
    a = load_points(write(tmp_path / "a.csv", GOOD[:3]))
    rows = [dict(r) for r in GOOD[:3]]
    rows[2]["step_s"] = 0.9
    b = load_points(write(tmp_path / "b.csv", rows))
    fa, fb = run(a, settings()), run(b, settings())
    assert fa["mfu"].tolist() == fb["mfu"].tolist()
    assert fa["predicted_step_s"].tolist() == fb["predicted_step_s"].tolist()
    assert fa["published_step_s"].tolist() != fb["published_step_s"].tolist()
    # and the calibrated point is reproduced: its replayed step is the published one
    assert fa["predicted_step_s"].iloc[0] == pytest.approx(0.5, rel=1e-6)
    # perturbing the smallest point does change the calibration
    rows[0]["step_s"] = 0.45
    fc = run(load_points(write(tmp_path / "c.csv", rows)), settings())
    assert fc["mfu"].iloc[0] > fa["mfu"].iloc[0]


def test_calibration_inverts_the_replay() -> None:
    """The utilisation found gives back the published step; compute is 1/mfu."""
    point = load_points(REPO / "data/external/at-scale/points.csv")[0]
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.at_scale.predict import predicted_step_s

    model = load_comm_spec(AB)
    mfu = calibrate_mfu(point, model, settings())
    again = predicted_step_s(base_trace(point), mfu, point, model, settings())
    assert again.replay.iteration_s == pytest.approx(point.published_step_s, rel=1e-8)
    assert 0 < mfu <= 1


def test_full_checkpointing_adds_one_forward_to_the_backward(tmp_path) -> None:
    rows = [row("g", 8, 0.5), row("g", 16, 0.5)]
    plain = load_points(write(tmp_path / "a.csv", rows))[0]
    rows[0]["activation_checkpointing"] = rows[1]["activation_checkpointing"] = "full"
    full = load_points(write(tmp_path / "b.csv", rows))[0]
    a, b = base_trace(plain).frame, base_trace(full).frame
    assert (b["backward_s"] - a["backward_s"]).tolist() == pytest.approx(a["forward_s"].tolist())


def test_growth_explained_arithmetic_on_a_synthetic_case() -> None:
    """Synthetic numbers: published 1.0 s at P0 and 1.10 s at P (same work per GPU), the
    prediction 1.05 s: half of the 10 % growth explained."""
    perfect = 1.0
    g_pub, g_pred = growth(1.10, perfect), growth(1.05, perfect)
    assert (g_pub, g_pred) == pytest.approx((0.10, 0.05))
    assert explained(g_pub, g_pred, 0.01) == pytest.approx(0.5)
    # below the floor, or a published gain: no share
    assert math.isnan(explained(0.005, 0.004, 0.01))
    assert math.isnan(explained(-0.05, 0.01, 0.01))
    # pooled: sum of predicted over sum of published, over the points that reach the floor
    assert pooled([(0.10, 0.05), (0.02, 0.02), (-0.03, 0.01)], 0.01) == pytest.approx(
        0.07 / 0.12)
    assert math.isnan(pooled([(0.001, 0.0)], 0.01))
    # perfect scaling with twice the work per GPU: the step doubles, the growth is per token
    assert growth(2.2, 2.0) == pytest.approx(0.10)


def test_study_end_to_end_on_two_small_groups(tmp_path) -> None:
    frame = run(load_points(write(tmp_path / "p.csv", GOOD)), settings())
    assert len(frame) == 5 and frame["calibration"].sum() == 2
    assert set(frame["variant"]) == {"before"} and set(frame["stragglers"]) == {"off"}
    pred = frame[~frame["calibration"]]
    # perfect scaling keeps the smallest count's time per token
    assert pred["perfect_step_s"].tolist() == pytest.approx([0.5, 0.5, 0.6])
    assert pred["perfect_error_pct"].tolist() == pytest.approx(
        [100 * (0.5 / 0.52 - 1), 100 * (0.5 / 0.55 - 1), 100 * (0.6 / 0.64 - 1)], abs=1e-3)
    stats = summary(frame, 0.01)
    assert stats["predicted_points"] == 3 and stats["groups"] == 2
    assert groups_frame(frame)["gpus"].tolist() == ["8-16-32", "16-64"]


def test_switches_apply_the_measured_models(tmp_path) -> None:
    """Stragglers stretch each point's compute by 1 + cv e_P, so after calibration on the
    smallest count the predicted step at P grows by (1 + cv e_P) / (1 + cv e_P0) when no
    communication is exposed; the overlap slowdown lengthens a step whose compute overlaps
    communication and never shortens one."""
    from gradsched.costmodel.stragglers import MEASURED, expected_max_normal

    points = load_points(write(tmp_path / "p.csv", GOOD[:3]))
    free = AtScaleSettings(comm=(CommChoice("a100", "alpha-beta:alpha=0,beta=0", "free"),))
    off = run(points, free).set_index("gpus")["predicted_step_s"]
    on = run(points, AtScaleSettings(comm=free.comm, stragglers=True)).set_index("gpus")
    cv = MEASURED["gpu-bound"].cv
    for gpus in (16, 32):
        ratio = (1 + cv * expected_max_normal(gpus)) / (1 + cv * expected_max_normal(8))
        assert on.loc[gpus, "predicted_step_s"] == pytest.approx(off.loc[gpus] * ratio,
                                                                 rel=1e-6)
    assert set(on["stragglers"]) == {"on"}
    plain = run(points, settings()).set_index("gpus")["exposed_comm_s"]
    slowed = run(points, settings(overlap_slowdown=True)).set_index("gpus")
    assert (slowed["exposed_comm_s"] >= plain - 1e-12).all()
    with pytest.raises(ConfigError, match="no --comm h100"):
        AtScaleSettings(comm=(CommChoice("a100", AB, "x"),)).choice("h100")


def test_every_llm_foundry_point_is_a_published_row() -> None:
    """Provenance: each llm-foundry point's GPU count, micro-batch, accumulation, global
    batch, T/s/GPU and parameter count are one row of the copied tables."""
    import csv

    base = REPO / "data/external/at-scale"
    published = set()
    for line in (base / "llm-foundry/tables.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 12 and cells[2].isdigit():
            head = 7 if len(cells) == 20 else 6  # with or without the "Model TFLOP" column
            published.add((cells[0], cells[1], cells[2], *cells[head:head + 3],
                           cells[head + 5], cells[-1]))
    with (base / "points.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["source"] == "llm-foundry"]
    assert len(rows) == 84
    for r in rows:
        key = (r["model"].removeprefix("mpt-"), r["seq_len"], r["gpus"], r["micro_batch"],
               r["grad_accum"], r["global_batch"], r["tokens_per_s_per_gpu"],
               r["params_published"])
        assert key in published, key


def test_free_communication_reproduces_perfect_scaling(tmp_path) -> None:
    """With every collective free, the calibrated replay is perfect scaling exactly: no
    error beyond the baseline's and no growth (the arithmetic's end-to-end check)."""
    free = AtScaleSettings(comm=(CommChoice("a100", "alpha-beta:alpha=0,beta=0", "free"),),
                           name="free-comm")
    frame = run(load_points(write(tmp_path / "p.csv", GOOD)), free)
    assert frame["predicted_step_s"].tolist() == pytest.approx(frame["perfect_step_s"].tolist(),
                                                               rel=1e-6)
    stats = summary(frame, 0.01)
    assert stats["growth_explained_pooled_pct"] == 0.0
    assert stats["median_abs_error_pct"] == stats["perfect_median_abs_error_pct"]
    assert stats["variant"] == "free-comm" and stats["comm_models"] == "free (A100)"


def test_fp32_reduction_and_sync_every_micro_batch_cost_what_they_move(tmp_path) -> None:
    """A float32 reduce-scatter moves twice the bf16 bytes (only the reduce-scatters: with
    every collective priced by bandwidth alone and nothing overlapping, the step grows by
    exactly the reduce-scatters' bf16 time); a run that reduce-scatters after every
    micro-batch (Composer's FSDP1) is k identical synchronised micro-batches, so its step
    is k times the single micro-batch's (the flops trace has no update time)."""
    from gradsched.costmodel.base import load_comm_spec
    from gradsched.experiments.at_scale.predict import predicted_step_s

    model = load_comm_spec("alpha-beta:alpha=0,beta=1e-9")
    plain = load_points(write(tmp_path / "a.csv", GOOD[:2]))[1]
    wide = load_points(write(tmp_path / "b.csv", [dict(r, reduce_dtype="fp32")
                                                   for r in GOOD[:2]]))[1]
    cfg = settings()
    base = base_trace(plain)
    one = predicted_step_s(base, 0.5, plain, model, cfg).replay
    two = predicted_step_s(base, 0.5, wide, model, cfg).replay
    assert two.comm_busy_s > one.comm_busy_s
    assert two.iteration_s >= one.iteration_s
    rows = [dict(r, grad_accum=3, global_batch=12 * r["gpus"]) for r in GOOD[:2]]
    every = load_points(write(tmp_path / "c.csv", [dict(r, grad_sync="every_micro_batch")
                                                   for r in rows]))[1]
    last = load_points(write(tmp_path / "d.csv", rows))[1]
    k3 = predicted_step_s(base, 0.5, every, model, cfg).replay
    assert k3.iteration_s == pytest.approx(3 * one.iteration_s, rel=1e-12)
    assert k3.n_collectives == 3 * one.n_collectives
    fsdp2 = predicted_step_s(base, 0.5, last, model, cfg).replay
    assert fsdp2.n_collectives < k3.n_collectives  # one reduce-scatter per unit per step


def test_committed_reduction_settings_follow_the_sources_frameworks() -> None:
    """Provenance of reduce_dtype and grad_sync (data/external/at-scale/README.md): Composer
    PURE reduces in bf16, the large-scale H100 table (Composer >= 0.17.2, DEFAULT) in fp32,
    torchtitan and KempnerForge in fp32; Composer (FSDP1) reduce-scatters every
    micro-batch, the FSDP2 sources only the last."""
    points = load_points(REPO / "data/external/at-scale/points.csv")
    for p in points:
        if p.source == "llm-foundry":
            assert p.grad_sync == "every_micro_batch"
            expected = ("bf16" if p.gpu == "a100" else
                        "fp32" if "-large-" in p.group else "not stated")
        else:
            assert p.grad_sync == "last_micro_batch"
            expected = "not stated" if p.source == "dgxc-maxtext" else "fp32"
        assert p.reduce_dtype == expected, (p.group, p.gpus)
