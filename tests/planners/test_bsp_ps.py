"""The parameter-server planners (bsp-ps, wfbp-ps, bytescheduler-ps) and ``--ps`` on the CLI.

Traces are SYNTHETIC (tests/conftest.py ``synthetic_compute_trace``) and every p2p model a
SYNTHETIC alpha-beta model; nothing here is a measurement.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradsched.cli import main
from gradsched.costmodel.base import AlphaBetaModel
from gradsched.costmodel.ps import ParameterServer, PSModel
from gradsched.errors import ConfigError
from gradsched.experiments import make_plan
from gradsched.planners import PS_ALGORITHMS
from gradsched.replay import ReplayOptions, replay
from tests.conftest import synthetic_compute_trace

SETTINGS = settings(deadline=None, max_examples=40,
                    suppress_health_check=[HealthCheck.too_slow])


def ps_model(workers: int = 4, servers: int = 2, colocated: bool = True, alpha: float = 1e-4,
             beta: float = 1e-8, bound: int = 4_096_000) -> PSModel:
    return PSModel(ParameterServer(workers, servers, colocated, AlphaBetaModel(alpha, beta),
                                   bound))


def iteration_s(name: str, trace: object, model: PSModel, knobs: dict | None = None) -> float:
    p = model.ps.workers
    plan = make_plan(name, trace, model, p, knobs)
    return replay(trace, plan, model, p, ReplayOptions(), timeline=False).iteration_s


@pytest.mark.parametrize("name", PS_ALGORITHMS)
def test_refuses_a_model_that_is_not_a_ps(name: str) -> None:
    with pytest.raises(ConfigError, match="parameter server"):
        make_plan(name, synthetic_compute_trace(), AlphaBetaModel(1e-4, 1e-8), 4)


def test_plan_shapes() -> None:
    trace = synthetic_compute_trace(n=6)
    model = ps_model()
    bsp = make_plan("bsp-ps", trace, model, 4)
    assert len(bsp.buckets) == 1 and bsp.buckets[0].collective == "rs_ag"
    assert set(bsp.buckets[0].tensors) == set(trace.names)
    assert (bsp.update, bsp.ag_issue) == ("global", "eager")
    wfbp = make_plan("wfbp-ps", trace, model, 4)
    assert [len(b.tensors) for b in wfbp.buckets] == [1] * 6
    assert all(b.collective == "all_reduce" for b in wfbp.buckets)
    assert wfbp.buckets[0].tensors == ("layer5.weight",)  # ready order: last layer first
    bs = make_plan("bytescheduler-ps", trace, model, 4,
                   {"search": "none", "partition_params": 5000, "credit_params": 8000})
    assert bs.algorithm == "bytescheduler-ps" and bs.update == "per_layer"
    numel = dict(zip(trace.frame["name"], trace.frame["numel"], strict=True))
    for bucket in bs.buckets:
        (name,) = bucket.tensors
        assert bucket.priority == int(name.removeprefix("layer").split(".")[0])
        assert bucket.chunks == -(-int(numel[name]) // 5000)
    assert bs.credit_bytes == pytest.approx(8000 * 4)


@SETTINGS
@given(n=st.integers(1, 12), seed=st.integers(0, 10**6), workers=st.integers(2, 8),
       colocated=st.booleans(), beta=st.floats(1e-10, 1e-6),
       bound=st.integers(1000, 10**6), forward_s=st.floats(1e-5, 1e-2))
def test_bsp_ps_never_faster_than_wfbp_ps_one_server(n: int, seed: int, workers: int,
                                                     colocated: bool, beta: float, bound: int,
                                                     forward_s: float) -> None:
    """With one server and no start-up the PS cost is additive over tensors, so pushing
    each tensor as soon as it is ready (wfbp-ps) is never slower than pushing everything
    after backward (bsp-ps); see the next test for where this stops holding."""
    trace = synthetic_compute_trace(n=n, seed=seed, forward_s=forward_s, bytes_scale=1 << 14)
    model = ps_model(workers, 1, colocated, alpha=0.0, beta=beta, bound=bound)
    bsp = iteration_s("bsp-ps", trace, model)
    wfbp = iteration_s("wfbp-ps", trace, model)
    assert bsp >= wfbp * (1 - 1e-9)


def test_bsp_ps_can_beat_wfbp_ps() -> None:
    """Not a theorem beyond one server and no start-up: tensors smaller than a partition
    each pay two start-ups and all land on one server (one key each; the replay runs one
    at a time), while bsp-ps pushes one buffer spread over the four servers."""
    trace = synthetic_compute_trace(n=40, seed=1, forward_s=1e-6, bytes_scale=1 << 12)
    model = ps_model(8, 4, False, alpha=1e-3, beta=1e-8, bound=1 << 20)
    assert iteration_s("bsp-ps", trace, model) < iteration_s("wfbp-ps", trace, model)


def test_cli_replay_and_plan_with_ps(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = synthetic_compute_trace(n=5)
    compute = tmp_path / "synthetic.csv"
    trace.save(compute)
    out = tmp_path / "r.csv"
    spec = "servers=2,colocated=1,p2p=alpha-beta:alpha=1e-4,beta=1e-8"
    assert main(["replay", "--compute", str(compute), "--ps", spec, "--world-size", "4",
                 "--algorithms", "bsp-ps,wfbp-ps,wfbp", "-o", str(out)]) == 0
    rows = pd.read_csv(out)
    assert list(rows["algorithm"]) == ["bsp-ps", "wfbp-ps", "wfbp"]
    assert np.all(rows["iteration_s"] > 0)
    desc = tmp_path / "ps.yaml"
    desc.write_text("workers: 4\nservers: 2\ncolocated: false\n"
                    "p2p: alpha-beta:alpha=1e-4,beta=1e-8\n")
    plan = tmp_path / "p.json"
    assert main(["plan", "--compute", str(compute), "--ps", str(desc), "--algorithm",
                 "bytescheduler-ps", "--knob", "search=none", "-o", str(plan)]) == 0
    assert plan.is_file()
    capsys.readouterr()
    assert main(["replay", "--compute", str(compute), "--ps", "servers=5,colocated=1,p2p="
                 "alpha-beta:alpha=1e-4,beta=1e-8", "--world-size", "4", "-o",
                 str(tmp_path / "x.csv")]) != 0
    assert "co-located" in capsys.readouterr().err
    assert main(["replay", "--compute", str(compute), "--ps", spec, "--comm",
                 "alpha-beta:alpha=1e-4,beta=1e-8", "--world-size", "4", "-o",
                 str(tmp_path / "y.csv")]) != 0
    assert "exactly one of" in capsys.readouterr().err
