"""The cluster record: the lock on a prefix (a second claim is refused, naming its owner),
malformed records named, and ``clean`` refusing names no record lists."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gradsched.distributed import cluster_record
from gradsched.distributed.cluster import ClusterError, EmulatedCluster


def test_a_prefix_is_claimed_once(tmp_path, monkeypatch):
    """The record file is the lock: a second claim of the prefix is refused, naming
    whether its owner runs or was killed (then: how to clean up); never cleaned away."""
    monkeypatch.setenv("GRADSCHED_RUN_DIR", str(tmp_path))
    path = cluster_record.record_path("p-")
    cluster = EmulatedCluster(2, None, prefix="p-")
    record = cluster._new_record()
    cluster_record.claim_record(path, record)
    with pytest.raises(ClusterError, match="in use by a running cluster"):
        cluster_record.claim_record(path, cluster._new_record())
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    record["owner"] = {"pid": int(gone.stdout), "start_time": "0"}
    path.write_text(json.dumps(record))
    with pytest.raises(ClusterError, match=f"killed .*gradsched cluster clean {path}"):
        cluster_record.claim_record(path, cluster._new_record())
    assert [p.name for p in tmp_path.joinpath("clusters").iterdir()] == ["p-.json"]


@pytest.mark.parametrize("content", ["", "[]", '{"version": 1}', "{not json"])
def test_malformed_record_is_named(tmp_path, content):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ClusterError, match=str(path)):
        cluster_record.load_record(path)


def test_clean_refuses_names_no_record_lists(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADSCHED_RUN_DIR", str(tmp_path))
    with pytest.raises(ClusterError, match="did not create it; nothing was removed"):
        cluster_record.clean_names(["someone-elses-ns"])
