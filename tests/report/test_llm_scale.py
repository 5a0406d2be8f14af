"""The LLM-scale table from advice JSONs (synthetic advice, labelled: only the fields the
table reads, with made-up values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.report.llm_scale import llm_scale_table

DDP = {  # synthetic
    "world_size": 1024, "recommendation": "gradsched-plan", "margin_pct": 19.26,
    "band_known": True,
    "ddp": {"current": {"iteration_s": 31.28},
            "best": {"iteration_s": 31.0, "bucket_cap_mb": 64.0}},
    "plan": {"iteration_s": 25.64, "winner": "dear", "plan": {"info": {"n_tensors": 1156}}},
    "notes": ["domain: the gradsched plan: 99.5 % of the modelled communication time is priced "
              "outside the measured message sizes (0.0 % below the smallest, 99.5 % above the "
              "largest): treat the time as an extrapolation",
              "domain: DDP's current setting: 97.0 % of the modelled communication time ..."]}
FITS = {"sharded": {"recommendation": "optimum", "default": {"replay": {"iteration_s": 37.8}},
                    "optimum": {"replay": {"iteration_s": 37.7},
                                "plan": {"units": [{}] * 22,
                                         "info": {"exact": False, "gap_to_bound_pct": 50.4}}}}}
NONE = {"sharded": {"recommendation": "none-fits", "default": {"replay": {"iteration_s": 145.0}},
                    "smallest_peak_bytes": 114 * 2.0**30, "memory_cap_bytes": 70 * 2.0**30}}


def _write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_one_row_per_model_with_the_advice_and_the_domain(tmp_path: Path) -> None:
    table, align = llm_scale_table(
        ["a", "b"], [_write(tmp_path, "d1", DDP), _write(tmp_path, "d2", DDP)],
        [_write(tmp_path, "s1", FITS), _write(tmp_path, "s2", NONE)])
    assert len(align) == table.shape[1] and list(table["model"]) == ["a", "b"]
    first = table.iloc[0].to_dict()
    assert first["tensors"] == "1156" and first["gradsched plan [s]"] == "25.64 (dear)"
    assert first["tuned DDP [s]"] == "31.00 (64 MiB)" and first["DDP advice"] == "gradsched plan"
    assert first["FSDP2 optimum [s]"] == "37.70 (22 units, gap 50.4 %)"
    assert first["outside measured sizes [%]"] == "99.5"  # the largest share of the notes
    assert first["comm model error [%]"] == "± 19.3"  # the band every time carries
    assert table.iloc[1]["FSDP2 optimum [s]"] == "none fits (114 > 70 GiB)"
    assert table.iloc[1]["FSDP2 advice"] == "none fits"


def test_a_missing_field_names_file_and_field(tmp_path: Path) -> None:
    broken = {k: v for k, v in DDP.items() if k != "plan"}
    with pytest.raises(InputError, match="plan") as err:
        llm_scale_table(["a"], [_write(tmp_path, "d", broken)], [_write(tmp_path, "s", FITS)])
    assert "d.json" in str(err.value)


def test_models_and_files_must_pair_up(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="one of each per model"):
        llm_scale_table(["a", "b"], [_write(tmp_path, "d", DDP)], [_write(tmp_path, "s", FITS)])


def test_an_unvalidated_extrapolation_has_no_band(tmp_path: Path) -> None:
    table, _ = llm_scale_table(["a"], [_write(tmp_path, "d", {**DDP, "band_known": False})],
                               [_write(tmp_path, "s", FITS)])
    assert table.iloc[0]["comm model error [%]"] == "unknown"
