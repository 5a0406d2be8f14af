"""The at-scale record the replay commands quote (gradsched.experiments.at_scale.record): the
committed copy agrees with the expected outputs of make reproduce (the variants table and the
record, paper/expected/) and with the pipeline's own record where one was built,
and the note says what the check found for the replay's own switches. The records built in
the note tests are synthetic (made-up numbers), labelled as such."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from gradsched.cli import main
from gradsched.errors import InputError
from gradsched.experiments.at_scale.record import (
    RECORD_KEYS,
    RECORD_PATH,
    SWITCH_VARIANTS,
    build_record,
    load_record,
    note,
)

REPO = Path(__file__).resolve().parents[2]
EXPECTED = REPO / "paper" / "expected"  # the committed expected outputs of make reproduce
TABLE = EXPECTED / "paper" / "tables" / "at-scale-variants.md.gz"
EXPECTED_RECORD = EXPECTED / "results" / "at-scale" / "record.json.gz"
PIPELINE_RECORD = REPO / "results" / "at-scale" / "record.json"
TABLE_COLUMNS = {"points": ("predicted_points", 0),
                 "median |error| [%]": ("median_abs_error_pct", 1),
                 "worst |error| [%]": ("worst_abs_error_pct", 1),
                 "perfect scaling median [%]": ("perfect_median_abs_error_pct", 1),
                 "optimistic": ("optimistic_points", 0),
                 "growth explained median [%]": ("growth_explained_median_pct", 1),
                 "growth explained pooled [%]": ("growth_explained_pooled_pct", 1)}


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells (a ``\\|`` inside a cell is a literal bar)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def _table_rows() -> dict[str, dict[str, str]]:
    text = gzip.decompress(TABLE.read_bytes()).decode("utf-8")
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    header = _cells(lines[0])
    return {row["variant"]: row for row in
            (dict(zip(header, _cells(line), strict=True)) for line in lines[2:])}


def test_the_committed_record_is_the_committed_variants_table() -> None:
    record = load_record()
    rows = _table_rows()
    for variant, entry in record.items():
        row = rows[variant]
        assert row["overlap slowdown"] == entry["overlap_slowdown"]
        assert row["stragglers"] == entry["stragglers"]
        assert row["unit syncs"] == "off"
        assert row["comm models"] == entry["comm_models"]
        for column, (key, digits) in TABLE_COLUMNS.items():
            assert row[column] == f"{float(entry[key]):.{digits}f}", (variant, column)


def test_the_committed_record_is_the_expected_output() -> None:
    assert gzip.decompress(EXPECTED_RECORD.read_bytes()) == RECORD_PATH.read_bytes()


def test_the_committed_record_is_the_pipelines_own() -> None:
    if not PIPELINE_RECORD.is_file():
        pytest.skip("no pipeline record (make reproduce writes results/at-scale/record.json)")
    assert json.loads(PIPELINE_RECORD.read_text(encoding="utf-8")) == \
        json.loads(RECORD_PATH.read_text(encoding="utf-8"))


def _synthetic(explained: dict[str, float]) -> dict[str, dict[str, object]]:
    """A made-up record: every variant with the same numbers but its growth explained."""
    base = {"sources": "a; b", "comm_models": "m (A100)", "overlap_slowdown": "on",
            "stragglers": "off", "predicted_points": 10, "predicted_gpus_min": 16,
            "predicted_gpus_max": 256, "median_abs_error_pct": 2.0,
            "worst_abs_error_pct": 9.0, "perfect_median_abs_error_pct": 3.0,
            "optimistic_points": 7, "growth_explained_pooled_pct": 20.0}
    return {v: base | {"variant": v, "growth_explained_median_pct": explained[v]}
            for v in SWITCH_VARIANTS.values()}


EXPLAINED = {"nccl": 5.0, "nccl-overlap": 10.0, "nccl-stragglers": 40.0,
             "nccl-overlap-stragglers": 50.0}


def test_note_within_one_node_is_none_and_beyond_it_quotes_its_own_switches() -> None:
    variants = _synthetic(EXPLAINED)
    assert note(8, True, False, variants) is None
    text = note(16, True, False, variants)
    assert text is not None
    assert "overlap slowdown on, stragglers off" in text and "10.0 %" in text
    assert "16-256 GPUs" in text and "7 of 10" in text
    assert "beyond" not in text
    assert "--stragglers auto explained the most (50.0 %" in text
    assert "--overlap-slowdown" not in text  # already on
    assert "beyond the largest GPU count checked (256)" in note(512, True, False, variants)


def test_note_names_the_best_switches_only_when_they_differ() -> None:
    variants = _synthetic(EXPLAINED)
    assert "explained the most" not in note(64, True, True, variants)
    text = note(64, False, False, variants)
    assert "--overlap-slowdown auto --stragglers auto explained the most" in text
    best_off = _synthetic(EXPLAINED | {"nccl-stragglers": 60.0})
    assert "--overlap-slowdown off explained the most (60.0 %" in note(64, True, True, best_off)


def test_build_record_keeps_the_switch_variants_and_refuses_a_missing_one() -> None:
    summaries = [*_synthetic(EXPLAINED).values(), {"variant": "before"}]
    record = build_record(summaries)
    assert list(record["variants"]) == list(SWITCH_VARIANTS.values())
    assert all(set(v) == set(RECORD_KEYS) for v in record["variants"].values())
    with pytest.raises(InputError, match="nccl-overlap-stragglers"):
        build_record(summaries[:3])
    broken = [dict(s) for s in summaries]
    del broken[0]["sources"]
    with pytest.raises(InputError, match="sources"):
        build_record(broken)


def test_load_record_names_the_missing_field(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    variants = build_record(list(_synthetic(EXPLAINED).values()))["variants"]
    del variants["nccl"]["worst_abs_error_pct"]
    path.write_text(json.dumps({"variants": variants}), encoding="utf-8")
    with pytest.raises(InputError, match="worst_abs_error_pct"):
        load_record(path)


H200 = REPO / "traces" / "compute" / "h200" / "gpt2-s1024-b8-cuda-bf16.csv"
CPU = REPO / "traces" / "compute" / "cpu" / "resnet18-b16-cpu-fp32.csv"


@pytest.mark.parametrize(("trace", "world", "extra", "expected"), [
    (H200, 16, [], "overlap slowdown on, stragglers off"),
    (H200, 16, ["--stragglers", "auto"], "overlap slowdown on, stragglers on"),
    (H200, 16, ["--overlap-slowdown", "off"], "overlap slowdown off, stragglers off"),
    (H200, 16, ["--compute-slowdown", "1.1"], "overlap slowdown off, stragglers off"),
    (H200, 8, [], None),
    (CPU, 16, [], None),
])
def test_replay_prints_the_note_on_gpu_traces_beyond_one_node(
        trace, world, extra, expected, tmp_path, capsys) -> None:
    assert main(["replay", "--compute", str(trace), "--comm", "alpha-beta:alpha=1e-5,beta=1e-10",
                 "--world-size", str(world), "--algorithms", "wfbp", "-o",
                 str(tmp_path / "r.csv"), *extra]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "note: at scale" in ln]
    if expected is None:
        assert err == []
    else:
        assert len(err) == 1 and expected in err[0]


def test_overlap_applies_follows_the_replays_rules() -> None:
    from argparse import Namespace

    from gradsched.commands._overlap import overlap_applies

    meta = {"device": "NVIDIA H200"}
    assert overlap_applies(Namespace(overlap_slowdown="auto"), meta)
    assert not overlap_applies(Namespace(overlap_slowdown="off"), meta)
    assert not overlap_applies(Namespace(overlap_slowdown="auto"), {"device": "cpu"})
    for replaced in ({"host": True}, {"semantics": "blocking"},
                     {"interference": "i.json"}, {"compute_slowdown": 1.1}):
        assert not overlap_applies(Namespace(overlap_slowdown="auto", **replaced), meta)
