"""Plan JSON: round trip, version check, coverage check, clear errors."""

from __future__ import annotations

import copy
import json

import pytest

from gradsched.errors import InputError
from gradsched.plan import FORMAT_VERSION, Bucket, Plan


def _plan() -> Plan:
    return Plan(
        "demo",
        (Bucket(("b", "c"), chunks=2, priority=1), Bucket(("a",), collective="rs_ag",
                                                          release_s=0.5)),
        knobs={"threshold_mb": 25}, update="per_layer", channels=2,
    )


def test_round_trip(tmp_path):
    plan = _plan()
    plan.save(tmp_path / "p.json")
    again = Plan.load(tmp_path / "p.json")
    assert again == plan
    assert again.to_dict() == plan.to_dict()


def test_save_is_deterministic(tmp_path):
    _plan().save(tmp_path / "1.json")
    _plan().save(tmp_path / "2.json")
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()


def test_unknown_version_is_refused(tmp_path):
    data = _plan().to_dict()
    data["format_version"] = FORMAT_VERSION + 1
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="format_version"):
        Plan.load(tmp_path / "p.json")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("collective", "alltoall", "collective"), ("chunks", 0, "chunks"),
     ("priority", "high", "priority"), ("release_s", -1, "release_s")],
)
def test_bad_bucket_fields(tmp_path, field, value, match):
    data = _plan().to_dict()
    data["buckets"][0][field] = value
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=match) as err:
        Plan.load(tmp_path / "p.json")
    assert "buckets[0]" in str(err.value) and "p.json" in str(err.value)


def test_bad_json_names_line(tmp_path):
    (tmp_path / "p.json").write_text('{\n "format": \n}')
    with pytest.raises(InputError, match="line 3"):
        Plan.load(tmp_path / "p.json")


def test_check_covers():
    plan = _plan()
    plan.check_covers(["a", "b", "c"])
    with pytest.raises(InputError, match="in no bucket"):
        plan.check_covers(["a", "b", "c", "d"])
    with pytest.raises(InputError, match="does not have"):
        plan.check_covers(["a", "b"])
    twice = Plan("x", (Bucket(("a",)), Bucket(("a", "b"))))
    with pytest.raises(InputError, match="buckets 0 and 1"):
        twice.check_covers(["a", "b"])


# ---------------------------------------------------------------------------------------
# Plan JSON: version 2 carries ag_issue and credit_bytes; version 1 still reads.
# ---------------------------------------------------------------------------------------
def test_plan_json_round_trip_and_version_1() -> None:
    plan = Plan("x", (Bucket(("a",), "rs_ag"),), update="per_layer", ag_issue="lookahead",
                credit_bytes=16e6)
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["format_version"] == 2
    assert Plan.from_dict(data) == plan
    old = {k: v for k, v in data.items() if k not in ("ag_issue", "credit_bytes")}
    old["format_version"] = 1
    back = Plan.from_dict(old)
    assert back.ag_issue == "eager" and back.credit_bytes is None
    with pytest.raises(InputError, match="version 2"):
        Plan.from_dict(old | {"ag_issue": "lookahead"})
    for field, value in (("ag_issue", "later"), ("credit_bytes", 0), ("credit_bytes", True),
                         ("credit_bytes", float("inf"))):
        bad = copy.deepcopy(data)
        bad[field] = value
        with pytest.raises(InputError, match=field):
            Plan.from_dict(bad)
