"""``diagnose`` on real public traces and on faults planted in them (SYNTHETIC traces,
generated here by :mod:`gradsched.diagnose.plant`, never committed): each planted fault is
named on what it was planted in, and nothing else new appears against the clean trace."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gradsched.diagnose import plant
from gradsched.diagnose.observe import observe_document
from gradsched.diagnose.run import Diagnosis, Settings, diagnose_documents, documents
from gradsched.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
HTA_DDP = str(REPO / "data/external/hta/nccl_parser_config/nccl_data.json.gz")
SETTINGS = Settings((HTA_DDP,))


@cache
def _docs(path: str) -> list[tuple[str, Any]]:
    return documents([path])


def _named(d: Diagnosis) -> set[tuple[str, int, int]]:
    return set(zip(d.causes["cause"], d.causes["rank"], d.causes["index"], strict=True))


@cache
def _clean(path: str) -> Diagnosis:
    return diagnose_documents(_docs(path), SETTINGS)


def test_clean_hta_ddp_trace() -> None:
    """HTA's DDP ResNet-50 rank: five buckets; the causes found are real ones (the step is
    host-bound, GPU busy ~18 %; the last bucket has 0.7 ms of compute left to hide behind)."""
    d = _clean(HTA_DDP)
    assert d.layout["layout"] == "ddp" and d.layout["buckets"] == 5
    assert _named(d) == {("host-bound", 0, -1), ("nothing-to-hide", 0, 6)}
    assert (d.frame["exposed_s"] <= d.frame["duration_s"]).all()
    assert d.fixes["change"].str.contains("bucket_cap_mb").any()


def test_planted_serialised_streams() -> None:
    label, doc = _docs(HTA_DDP)[0]
    d = diagnose_documents([(label, plant.serialise(doc, label))], SETTINGS)
    assert _named(d) - _named(_clean(HTA_DDP)) == {("serialised", 0, -1)}
    assert d.fixes["change"].str.contains("CUDA_DEVICE_MAX_CONNECTIONS").any()


def test_planted_late_launch() -> None:
    label, doc = _docs(HTA_DDP)[0]
    step = observe_document(doc, label)
    target = plant.backward_target(step)
    assert target is not None
    dur = float(step.frame.loc[step.frame["index"] == target, "duration_s"].iloc[0])
    late = plant.delay_launch(doc, label, target, plant.plant_delay_s(dur))
    d = diagnose_documents([(label, late)], SETTINGS)
    assert _named(d) - _named(_clean(HTA_DDP)) == {("launch-late", 0, target)}


def test_bad_framework_refused() -> None:
    with pytest.raises(ConfigError, match="--framework"):
        Settings((HTA_DDP,), framework="horovod").check()
