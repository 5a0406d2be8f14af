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


def _check(rows: list[dict[str, Any]], expect_found: set[str]) -> None:
    found = {r["fault"] for r in rows if r["applicable"] and r["found"]}
    assert found == expect_found, rows
    assert all(r["false_causes"] == "" for r in rows), rows


def test_planted_faults_dlrm_eight_ranks() -> None:
    """PARAM's eight-rank DLRM step: serialisation, a late launch and a slowed rank are
    each named; no prefetch target (no forward collective ran beside compute)."""
    from gradsched.diagnose.planted import check_trace

    docs = _docs(str(REPO / "data/external/param/dlrm_kineto.tar.gz"))
    rows = check_trace("dlrm", docs)
    _check(rows, {"serialised", "launch-late", "waiting-on-rank"})
    slowed = next(r for r in rows if r["fault"] == "waiting-on-rank")
    assert slowed["target"] == "rank 7 at collective 4"


def test_planted_prefetch_removed_trace_diff_control() -> None:
    """HTA's trace-diff control rank: its first forward all-to-all ran beside compute;
    made to wait for the compute stream, it is named a missed prefetch, and nothing else
    new appears."""
    path = str(REPO / "data/external/hta/trace_diff/control/control.json.gz")
    (label, doc), = _docs(path)
    clean = _clean(path)
    target = plant.prefetch_target(clean.steps[0])
    assert target == 0
    d = diagnose_documents([(label, plant.remove_prefetch(doc, label, target))],
                           Settings((path,), step=clean.steps[0].step))
    assert _named(d) - _named(clean) == {("prefetch-missed", 3, 0)}


def test_slower_than_the_sweep_and_the_domain_notes() -> None:
    """An inline alpha-beta 'sweep' a hundred times faster than the A100 trace's all-reduces
    (1 us + 10 ps/byte: ~0.3 ms for 30 MiB against the 2.7 ms observed) names every
    all-reduce slower than the sweep; the two broadcasts (31 us and 8 us) are below the
    causes' 50 us floor. Every collective is priced by the given model."""
    from gradsched.costmodel.base import load_comm_spec

    spec = "alpha-beta:alpha=1e-6,beta=1e-11"
    d = diagnose_documents(_docs(HTA_DDP), Settings((HTA_DDP,), comm=spec),
                           load_comm_spec(spec))
    slow = d.causes[d.causes["cause"] == "slower-than-sweep"]
    assert set(slow["index"]) == {2, 3, 4, 5, 6}
    assert (d.frame["model_source"] == "sweep").all()
    assert not any("fitted on this trace" in n for n in d.notes)


@pytest.mark.slow
def test_cpu_gloo_run_and_a_one_thread_serialised_plant(tmp_path: Path) -> None:
    """A real two-rank gloo DDP run profiled here goes through the same command: eight 1 MiB
    buckets recognised on gloo's threads, no serialisation; with every collective planted
    (synthetic) onto the training thread, serialisation is named on both ranks."""
    import json
    import socket
    import subprocess
    import sys

    pytest.importorskip("torch")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([sys.executable, str(Path(__file__).with_name("gloo_step.py")),
                    str(tmp_path), str(port)], check=True, timeout=300,
                   capture_output=True)
    docs = [(f"rank{r}", json.loads((tmp_path / f"rank{r}.json").read_text()))
            for r in (0, 1)]
    clean = diagnose_documents(docs, Settings(("-",)))
    assert clean.layout["buckets"] == 8
    assert set(clean.layout["bucket_bytes"]) == {262656 * 4}  # 512 x 513 fp32 per bucket
    assert "serialised" not in set(clean.causes["cause"])
    planted = [(lbl, plant.serialise_cpu(doc, lbl)) for lbl, doc in docs]
    d = diagnose_documents(planted, Settings(("-",), step=clean.steps[0].step))
    assert {("serialised", 0, -1), ("serialised", 1, -1)} <= _named(d)
    assert d.fixes["change"].str.contains("async_op=True").any()
