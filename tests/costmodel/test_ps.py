"""The parameter-server cost model (costmodel/ps.py): hand-computed costs, byte counts, a
faster link is never slower, and bad descriptions.

Every p2p model here is a SYNTHETIC alpha-beta model (a = 1e-4 s, b = 1e-8 s/byte unless
drawn at random), not a measurement.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradsched.costmodel.base import AlphaBetaModel, model_from_dict
from gradsched.costmodel.ps import (
    DEFAULT_PARTITION_BYTES,
    ParameterServer,
    PSModel,
    load_ps,
    push_bytes,
)
from gradsched.errors import ConfigError, InputError

A, B = 1e-4, 1e-8  # SYNTHETIC p2p: 0.1 ms start-up, 100 MB/s
BOUND = 1000  # partition bytes in the hand-computed cases
SETTINGS = settings(deadline=None, max_examples=60,
                    suppress_health_check=[HealthCheck.too_slow])


def ps_model(workers: int, servers: int, colocated: bool, *, alpha: float = A,
             beta: float = B, bound: int = BOUND, placement: str = "round-robin") -> PSModel:
    return PSModel(ParameterServer(workers, servers, colocated, AlphaBetaModel(alpha, beta),
                                   bound, placement))


# ---------------------------------------------------------------- hand-computed costs
# Each expected value: a + (messages on the busiest link direction) x b x message bytes.
CASES = [
    # P=2, S=1, separate. M=1000: one partition; the server receives 2 x 1000 bytes.
    (2, 1, False, 1000, A + 2 * 1000 * B, 2 * (A + 2 * 1000 * B)),
    # M=4000: 4 partitions; the server receives 8 x 1000; push + the last partition's pull.
    (2, 1, False, 4000, A + 8 * 1000 * B, (A + 8 * 1000 * B) + (A + 2 * 1000 * B)),
    # M=2500: partitions 1000, 1000, 500 on the one server: 2 x 2500 bytes.
    (2, 1, False, 2500, A + 2 * 2500 * B, (A + 5000 * B) + (A + 2 * 500 * B)),
    # P=4, S=2, co-located. M=1000: server 0 holds it; 3 other workers send it in.
    (4, 2, True, 1000, A + 3 * 1000 * B, 2 * (A + 3 * 1000 * B)),
    # M=4000: each server 2 partitions; machine s receives 3 x 2000 (push) and its own
    # direction carries 2000 (push out) + 6000 (pull out) = 8000 bytes; the pipeline's other
    # bound: push 6000-byte time + the last partition's pull (3 x 1000 in to its server).
    (4, 2, True, 4000, A + 6000 * B, max(A + 8000 * B, (A + 6000 * B) + (A + 3000 * B))),
    # P=4, S=2, separate. M=4000: each server receives 4 x 2000; a worker sends 4000.
    (4, 2, False, 4000, A + 8000 * B, (A + 8000 * B) + (A + 4000 * B)),
    # M=1000: server 0 receives 4 x 1000.
    (4, 2, False, 1000, A + 4000 * B, 2 * (A + 4000 * B)),
]


@pytest.mark.parametrize(("p", "s", "colocated", "m", "push", "all_reduce"), CASES)
def test_hand_computed(p: int, s: int, colocated: bool, m: int, push: float,
                       all_reduce: float) -> None:
    model = ps_model(p, s, colocated)
    assert model.time("reduce_scatter", m, p) == pytest.approx(push, rel=1e-12)
    assert model.time("all_gather", m, p) == pytest.approx(push, rel=1e-12)
    assert model.time("all_reduce", m, p) == pytest.approx(all_reduce, rel=1e-12)


@pytest.mark.parametrize(("p", "s", "colocated", "m", "push", "all_reduce"), [
    # P=4, S=2, separate, balanced. M=1000: 500 bytes per server; a server receives
    # 4 x 500; push + the last round's pull (the same 500-byte partitions).
    (4, 2, False, 1000, A + 2000 * B, 2 * (A + 2000 * B)),
    # M=3000: 1500 per server = 1000 + 500; a server receives 4 x 1500.
    (4, 2, False, 3000, A + 6000 * B, (A + 6000 * B) + (A + 2000 * B)),
    # P=4, S=2, co-located, balanced, M=1000: machine s receives 3 x 500, sends 500; its
    # directions carry 500 + 3 x 500 = 2000 bytes of push and pull together.
    (4, 2, True, 1000, A + 1500 * B, max(A + 2000 * B, 2 * (A + 1500 * B))),
])
def test_hand_computed_balanced(p: int, s: int, colocated: bool, m: int, push: float,
                                all_reduce: float) -> None:
    model = ps_model(p, s, colocated, placement="balanced")
    assert model.time("reduce_scatter", m, p) == pytest.approx(push, rel=1e-12)
    assert model.time("all_reduce", m, p) == pytest.approx(all_reduce, rel=1e-12)


def test_balanced_formula_alpha_beta() -> None:
    """Many balanced partitions: push = a + f_push b M (module docstring)."""
    m = 2 * 4 * 50 * BOUND  # 400 partitions, 100 per server of 4
    for p, s, colocated, f_push in ((8, 4, False, 2.0), (8, 4, True, 7 / 4), (4, 4, True, 3 / 4),
                                    (2, 4, False, 1.0), (6, 4, True, 5 / 4)):
        model = ps_model(p, s, colocated)
        assert model.time("reduce_scatter", m, p) == pytest.approx(A + f_push * B * m)
        assert model.bottleneck_factors()[0] == pytest.approx(f_push)


def test_colocated_all_servers_is_a_ring() -> None:
    """S = P co-located: a push + pull moves 2 (P-1)/P M bytes per link, as a ring."""
    p, m = 4, 4 * 100 * BOUND
    model = ps_model(p, p, True)
    assert model.bottleneck_factors()[1] == pytest.approx(2 * (p - 1) / p)
    assert model.time("all_reduce", m, p) == pytest.approx(A + 2 * (p - 1) / p * B * m,
                                                           rel=1e-12)


def test_round_trip_and_world_size() -> None:
    model = ps_model(4, 2, True)
    again = model_from_dict(json.loads(json.dumps(model.to_dict())))
    assert isinstance(again, PSModel) and again.to_dict() == model.to_dict()
    assert model.world_sizes() == (4,)
    with pytest.raises(ConfigError, match="4 workers"):
        model.time("all_reduce", 1000, 2)


# ------------------------------------------------------------------------ properties

@SETTINGS
@given(p=st.integers(1, 12), s=st.integers(1, 12), colocated=st.booleans(),
       m=st.integers(0, 10**8), bound=st.integers(1, 10**7), balanced=st.booleans())
def test_bytes_each_link_moves(p: int, s: int, colocated: bool, m: int, bound: int,
                               balanced: bool) -> None:
    """Each worker pushes M; the servers receive P M in all (P M_s each, M_s their
    partitions' bytes; P M / S with the balanced placement); the links carry what the
    docstring says."""
    if colocated and s > p:
        s = p
    ps = ParameterServer(p, s, colocated, AlphaBetaModel(A, B), bound,
                         "balanced" if balanced else "round-robin")
    moved = push_bytes(ps, m)
    assert np.allclose(moved.worker_send, m)
    if balanced:
        assert np.allclose(moved.server_receive, p * m / s)
    assert moved.server_receive.sum() == pytest.approx(p * m)
    share = moved.server_receive / p
    if m % (s * bound) == 0:
        assert np.allclose(moved.server_receive, p * m / s)
    if not colocated:
        assert moved.link_bytes[0] == pytest.approx(m)
        assert np.allclose(moved.link_bytes[1:], moved.server_receive)
    else:
        out = moved.link_bytes[0:2 * s:2]
        into = moved.link_bytes[1:2 * s:2]
        assert np.allclose(out, m - share) and np.allclose(into, (p - 1) * share)
        if p > s:  # a machine without a server sends all M
            assert moved.link_bytes[-1] == pytest.approx(m)
        total_out = out.sum() + (p - s) * m
        assert total_out == pytest.approx((p - 1) * m)  # all but the local copies
        assert into.sum() == pytest.approx((p - 1) * m)


@SETTINGS
@given(p=st.integers(2, 10), s=st.integers(1, 10), colocated=st.booleans(),
       alpha=st.floats(0, 1e-2), beta=st.floats(1e-11, 1e-6),
       faster=st.floats(0.05, 1.0), sizes=st.lists(st.integers(0, 10**8), min_size=1,
                                                   max_size=8),
       bound=st.integers(1000, 10**7), placement=st.sampled_from(["round-robin", "balanced"]))
def test_faster_link_never_slower(p: int, s: int, colocated: bool, alpha: float, beta: float,
                                  faster: float, sizes: list[int], bound: int,
                                  placement: str) -> None:
    if colocated and s > p:
        s = p
    slow = ps_model(p, s, colocated, alpha=alpha, beta=beta, bound=bound, placement=placement)
    fast = ps_model(p, s, colocated, alpha=alpha * faster, beta=beta * faster, bound=bound,
                    placement=placement)
    m = np.asarray(sizes, dtype=float)
    for collective in ("all_reduce", "reduce_scatter", "all_gather"):
        assert np.all(fast.times(collective, m, p) <= slow.times(collective, m, p) * (1 + 1e-12))
    assert fast.sustained_algbw_Bps(p) >= slow.sustained_algbw_Bps(p)


@SETTINGS
@given(p=st.integers(2, 10), s=st.integers(1, 10), colocated=st.booleans(),
       sizes=st.lists(st.integers(0, 10**8), min_size=1, max_size=8),
       bound=st.integers(1000, 10**7), placement=st.sampled_from(["round-robin", "balanced"]))
def test_no_bucket_beats_the_sustained_rate(p: int, s: int, colocated: bool,
                                            sizes: list[int], bound: int,
                                            placement: str) -> None:
    """The rate the replay's lower bound uses is never beaten (push: half an all-reduce)."""
    if colocated and s > p:
        s = p
    model = ps_model(p, s, colocated, bound=bound, placement=placement)
    rate = model.sustained_algbw_Bps(p)
    m = np.asarray(sizes, dtype=float)
    startup = min(model.startup_s(c, p) for c in ("all_reduce", "reduce_scatter", "all_gather"))
    assert startup == pytest.approx(A)
    tol = 1e-12
    assert np.all(model.times("all_reduce", m, p) >= (startup + m / rate) * (1 - tol))
    assert np.all(model.times("reduce_scatter", m, p) >= (startup + 0.5 * m / rate) * (1 - tol))


# ------------------------------------------------------------------ bad descriptions

P2P = "alpha-beta:alpha=1e-4,beta=1e-8"


@pytest.mark.parametrize(("spec", "field", "message"), [
    (f"servers=0,colocated=0,p2p={P2P}", "servers", "servers must be"),
    (f"servers=5,colocated=1,p2p={P2P}", "servers", "co-located"),
    ("servers=2,colocated=1", "p2p", "missing field 'p2p'"),
    (f"colocated=1,p2p={P2P}", "servers", "missing field 'servers'"),
    (f"servers=2,colocated=1,partition_bytes=inf,p2p={P2P}", "partition_bytes", "integer"),
    (f"servers=nan,colocated=1,p2p={P2P}", "servers", "integer"),
    ("servers=2,colocated=1,p2p=alpha-beta:alpha=nan,beta=1e-8", "p2p", "alpha"),
    (f"servers=2,colocated=maybe,p2p={P2P}", "colocated", "true/false"),
    (f"servers=2,colour=1,p2p={P2P}", "colour", "unknown field"),
    (f"servers=2,workers=3,p2p={P2P}", "workers", "world size 4"),
    (f"servers=2,placement=hashed,p2p={P2P}", "placement", "round-robin"),
])
def test_bad_inline_descriptions(spec: str, field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        load_ps(spec, world_size=4)
    assert err.value.field == field and err.value.path == "--ps"


def test_missing_workers_without_world_size() -> None:
    with pytest.raises(InputError, match="workers"):
        load_ps(f"servers=1,p2p={P2P}")


def test_yaml_file_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "ps.yaml"
    good.write_text(f"workers: 4\nservers: 2\ncolocated: true\np2p: '{P2P}'\n")
    ps = load_ps(good)
    assert (ps.workers, ps.servers, ps.colocated, ps.partition_bytes) == (
        4, 2, True, DEFAULT_PARTITION_BYTES)
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"workers: 4\nservers: -1\np2p: '{P2P}'\n")
    with pytest.raises(InputError) as err:
        load_ps(bad)
    assert err.value.path == str(bad) and err.value.field == "servers"
    nop2p = tmp_path / "nop2p.yaml"
    nop2p.write_text("workers: 4\nservers: 1\np2p: missing.json\n")
    with pytest.raises(InputError, match="p2p model") as err:
        load_ps(nop2p)
    assert err.value.field == "p2p"
    broken = tmp_path / "broken.yaml"
    broken.write_text("workers: [4\n")
    with pytest.raises(InputError, match="YAML"):
        load_ps(broken)
    with pytest.raises(InputError, match="not found"):
        load_ps(tmp_path / "absent.json")


def test_constructor_refuses_non_finite() -> None:
    with pytest.raises(ConfigError):
        ParameterServer(2, 1, False, AlphaBetaModel(A, B), math.inf)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ParameterServer(True, 1, False, AlphaBetaModel(A, B))  # type: ignore[arg-type]


class _LineCapped(AlphaBetaModel):
    """SYNTHETIC p2p whose sweep beats its own line rate (as a tc tbf burst does)."""

    def line_rate_Bps(self) -> float | None:
        return 0.5 / B


def test_p2p_rate_capped_at_the_line_rate() -> None:
    model = PSModel(ParameterServer(2, 2, True, _LineCapped(A, B), BOUND, "balanced"))
    assert model.link.rate_Bps == pytest.approx(0.5 / B)
    m = 2 * 100 * BOUND  # each machine: its 100 partitions in, the other 100 out
    assert model.time("reduce_scatter", m, 2) == pytest.approx(A + 2 * B * m / 2)
