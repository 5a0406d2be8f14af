"""The plan's sharded-optimizer fields (format version 3) and what the replay makes of
them; earlier plans keep their JSON (version 2) and arithmetic. SYNTHETIC traces."""

from __future__ import annotations

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError, InputError
from gradsched.plan import Bucket, ParamSync, Plan
from gradsched.replay import replay
from tests.planners.test_sharded_optimizers import MODEL, trace

SHARDED = Plan("x", (Bucket(("t0", "t1", "t2"), "reduce_scatter"),), optimizer="sharded",
               param_sync=(ParamSync("all_gather", 3584.0),))


def test_a_plan_without_the_new_fields_is_written_as_version_2():
    plain = Plan("x", (Bucket(("t0", "t1", "t2")),))
    data = plain.to_dict()
    assert data["format_version"] == 2 and "optimizer" not in data
    assert Plan.from_dict(data) == plain


def test_version_3_round_trips_and_is_refused_as_version_2():
    data = SHARDED.to_dict()
    assert data["format_version"] == 3
    assert Plan.from_dict(data) == SHARDED
    with pytest.raises(InputError, match="needs plan format version 3"):
        Plan.from_dict({**data, "format_version": 2})
    with pytest.raises(InputError, match="needs plan format version 3"):
        Plan.from_dict({**data, "format_version": 2, "optimizer": "replicated",
                        "param_sync": []} | {"optimizer": "sharded"})


@pytest.mark.parametrize(("change", "message"), [
    ({"optimizer": "replicated"}, "param_sync needs optimizer=sharded"),
    ({"optimizer": "half"}, "optimizer must be one of"),
    ({"update": "per_layer"}, "needs update=global"),
    ({"param_sync": [{"collective": "all_reduce", "bytes": 1}]}, "collective must be one of"),
    ({"param_sync": [{"collective": "all_gather", "bytes": -1}]}, "bytes must be"),
])
def test_bad_sharded_fields_are_refused(change, message):
    with pytest.raises(InputError, match=message):
        Plan.from_dict(SHARDED.to_dict() | change)


def test_bucket_owner_needs_all_reduce_buckets_in_the_replay_too():
    bad = Plan("x", (Bucket(("t0", "t1", "t2"), "rs_ag"),), optimizer="bucket_owner")
    with pytest.raises((ConfigError, InputError), match="all_reduce buckets"):
        replay(trace(), bad, MODEL, 4)


def test_sharded_step_and_gathers_are_priced_and_drawn():
    # RS 1.875 from 3 -> 4.875; step 1.2 / 4 = 0.3; AG 1.875 -> 7.05; + forward 1.5
    r = replay(trace(), SHARDED, MODEL, 4, timeline=True)
    assert r.iteration_s == pytest.approx(8.55, abs=1e-12)
    assert r.comm_busy_s == pytest.approx(3.75) and r.n_collectives == 2
    steps = [e for e in r.events if e.label == "optimizer step (shard)"]
    gathers = [e for e in r.events if e.label == "param sync 0"]
    assert steps and gathers and gathers[0].start_s == pytest.approx(steps[0].end_s)
    # one rank: nothing to communicate, the whole update
    assert replay(trace(), SHARDED, AlphaBetaModel(0.25, 1 / 1024), 1).iteration_s \
        == pytest.approx(1.5 + 3 + 1.2)
