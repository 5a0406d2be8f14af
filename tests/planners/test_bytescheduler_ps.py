"""``bytescheduler-ps`` tunes its credit in the parameter-server range.

Traces are SYNTHETIC (tests/conftest.py ``synthetic_compute_trace``) and every p2p model a
SYNTHETIC alpha-beta model; nothing here is a measurement.
"""

from __future__ import annotations

import pytest

from gradsched.errors import ConfigError
from gradsched.experiments import make_plan
from gradsched.planners.bytescheduler_ps import CREDIT_SPACE_PARAMS
from tests.conftest import synthetic_compute_trace
from tests.planners.test_bsp_ps import ps_model


def test_bytescheduler_ps_tunes_the_credit_in_the_ps_range() -> None:
    trace = synthetic_compute_trace(n=8, bytes_scale=1 << 16)
    plan = make_plan("bytescheduler-ps", trace, ps_model(), 4, {"tune_iters": 4})
    credits = [e["credit_params"] for e in plan.info["evaluated"]]
    assert len(credits) == 4
    assert all(CREDIT_SPACE_PARAMS[0] <= c <= CREDIT_SPACE_PARAMS[1] for c in credits)
    with pytest.raises(ConfigError, match="search"):
        make_plan("bytescheduler-ps", trace, ps_model(), 4, {"search": "partition"})
