"""Identities of the analytic collective-algorithm costs (gradsched.costmodel.formulas)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradsched.costmodel.formulas import (
    ALGORITHMS,
    AnalyticModel,
    algorithms_for,
    best_cost,
    cost,
    fit_link_parameters,
    invert_alpha_beta,
    linear_coefficients,
    optimal_chunk,
)
from gradsched.errors import ConfigError
from gradsched.traces.columns import COLLECTIVES

ALPHA, BETA, GAMMA = 5e-6, 1e-10, 2e-11
M = np.logspace(2, 9, 50)


@pytest.mark.parametrize("p", [2, 3, 4, 7, 8, 16, 100, 128])
def test_ring_reduce_scatter_plus_all_gather_is_all_reduce_exactly(p: int) -> None:
    rs = cost("reduce_scatter", "ring", M, p, ALPHA, BETA, GAMMA)
    ag = cost("all_gather", "ring", M, p, ALPHA, BETA, GAMMA)
    ar = cost("all_reduce", "ring", M, p, ALPHA, BETA, GAMMA)
    # the coefficients add up exactly; the evaluated sums agree to rounding (1 ulp)
    np.testing.assert_allclose(rs + ag, ar, rtol=4e-16, atol=0)
    a_rs, b_rs, c_rs = linear_coefficients("reduce_scatter", "ring", p)
    a_ag, b_ag, c_ag = linear_coefficients("all_gather", "ring", p)
    assert (a_rs + a_ag, b_rs + b_ag, c_rs + c_ag) == linear_coefficients("all_reduce", "ring", p)


@pytest.mark.parametrize("p", [2, 4, 8, 64, 1024])
def test_rabenseifner_bandwidth_term_equals_ring_for_power_of_two(p: int) -> None:
    _, b_ring, c_ring = linear_coefficients("all_reduce", "ring", p)
    a_rhd, b_rhd, c_rhd = linear_coefficients("all_reduce", "rhd", p)
    assert b_rhd == pytest.approx(2 * (p - 1) / p, rel=1e-15)
    assert b_rhd == pytest.approx(b_ring, rel=1e-15)
    assert c_rhd == pytest.approx(c_ring, rel=1e-15)
    assert a_rhd == 2 * math.log2(p)  # latency: 2 log2 P alpha (Thakur et al. 2005)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 9, 33, 100])
def test_binomial_tree_takes_ceil_log2_rounds(p: int) -> None:
    rounds = math.ceil(math.log2(p))
    a, b, c = linear_coefficients("broadcast", "mst", p)
    assert (a, b, c) == (rounds, rounds, 0.0)
    assert linear_coefficients("reduce", "mst", p) == (rounds, rounds, rounds)
    assert cost("broadcast", "mst", 1000.0, p, 1.0, 0.0)[()] == rounds


@pytest.mark.parametrize("p", [2, 4, 16, 256])
def test_recursive_doubling_all_reduce_latency_is_log2_p(p: int) -> None:
    t = cost("all_reduce", "rd", np.array([0.0]), p, ALPHA, BETA)
    assert t[0] == pytest.approx(math.log2(p) * ALPHA, rel=1e-15)


@pytest.mark.parametrize("alg", ["rd", "rhd"])
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("p", [3, 5, 6, 7, 12, 100])
def test_non_power_of_two_is_finite_and_not_cheaper_than_power_below(
    alg: str, collective: str, p: int
) -> None:
    below = 1 << (p.bit_length() - 1)
    t = cost(collective, alg, M, p, ALPHA, BETA, GAMMA)
    t_below = cost(collective, alg, M, below, ALPHA, BETA, GAMMA)
    assert np.all(np.isfinite(t))
    assert np.all(t >= t_below)
    # and strictly more expensive than the power of two for rd/rhd all-reduce (extra steps)
    if collective == "all_reduce":
        assert np.all(t > t_below)


@pytest.mark.parametrize("collective", ["broadcast", "reduce", "all_reduce"])
def test_linear_pipeline_bandwidth_term_is_independent_of_p(collective: str) -> None:
    big = np.array([1e12])
    per_byte = {"broadcast": BETA, "reduce": BETA + GAMMA, "all_reduce": 2 * BETA + GAMMA}
    ratios = [cost(collective, "lp", big, p, ALPHA, BETA, GAMMA)[0] / big[0]
              for p in (3, 8, 64, 512)]
    for r in ratios:
        assert r == pytest.approx(per_byte[collective], rel=0.02)
    # ring's bandwidth term does depend on P: (P-1)/P grows with P
    ring = [linear_coefficients("all_gather", "ring", p)[1] for p in (3, 512)]
    assert ring[0] < ring[1]


def test_linear_pipeline_optimal_chunk_formula_and_minimum() -> None:
    p, m = 16, 1e8
    b_star = optimal_chunk("broadcast", "lp", np.array([m]), p, ALPHA, BETA)[0]
    assert b_star == pytest.approx(math.sqrt(m * ALPHA / ((p - 2) * BETA)), rel=1e-12)
    t_star = cost("broadcast", "lp", m, p, ALPHA, BETA)[()]
    assert t_star == pytest.approx((math.sqrt((p - 2) * ALPHA) + math.sqrt(m * BETA)) ** 2,
                                   rel=1e-12)
    for factor in (0.25, 0.5, 2.0, 4.0):
        assert cost("broadcast", "lp", m, p, ALPHA, BETA, chunk_bytes=b_star * factor) > t_star
    # chunk = whole message: the unpipelined chain (P-1)(alpha + M beta)
    whole = cost("broadcast", "lp", m, p, ALPHA, BETA, chunk_bytes=m)[()]
    assert whole == pytest.approx((p - 1) * (ALPHA + m * BETA), rel=1e-12)


def test_double_binary_tree_approaches_full_bandwidth() -> None:
    big = np.array([1e12])
    for p in (4, 64, 1024):
        t = cost("all_reduce", "dbt", big, p, ALPHA, BETA, GAMMA)[0]
        assert t / big[0] == pytest.approx(2 * BETA + GAMMA, rel=0.02)


def test_world_size_one_costs_nothing_and_all_pairs_defined() -> None:
    for collective in COLLECTIVES:
        for alg in algorithms_for(collective):
            assert np.all(cost(collective, alg, M, 1, ALPHA, BETA, GAMMA) == 0)
            t = cost(collective, alg, M, 24, ALPHA, BETA, GAMMA)
            assert np.all(np.isfinite(t)) and np.all(t > 0)
            assert np.all(np.diff(t) >= 0), (collective, alg)


def test_unsupported_algorithm_and_bad_world_size_raise() -> None:
    with pytest.raises(ConfigError, match="does not implement"):
        cost("all_gather", "lp", M, 8, ALPHA, BETA)
    with pytest.raises(ConfigError, match="unknown algorithm"):
        cost("all_reduce", "butterfly", M, 8, ALPHA, BETA)
    with pytest.raises(ConfigError, match="world size"):
        cost("all_reduce", "ring", M, 0, ALPHA, BETA)


def test_best_is_the_elementwise_minimum() -> None:
    t, idx = best_cost("all_reduce", M, 64, ALPHA, BETA, GAMMA)
    algs = algorithms_for("all_reduce")
    stack = np.stack([cost("all_reduce", a, M, 64, ALPHA, BETA, GAMMA) for a in algs])
    np.testing.assert_array_equal(t, stack.min(axis=0))
    assert len(set(idx.tolist())) >= 2  # small and large messages prefer different algorithms


def test_analytic_model_derived_at_one_p_predicts_ring_at_another_exactly() -> None:
    """SYNTHETIC: ring all-reduce data at P=16; alpha-beta fit there; predict P=64."""
    alpha, beta = 2e-6, 8e-11
    fit_p, other_p = 16, 64
    # an alpha-beta fit of ring at P=16 is exactly alpha_fit = 2(P-1)alpha, beta_fit = 2(P-1)/P beta
    a_fit = 2 * (fit_p - 1) * alpha
    b_fit = 2 * (fit_p - 1) / fit_p * beta
    al, be = invert_alpha_beta("all_reduce", "ring", fit_p, a_fit, b_fit)
    assert al == pytest.approx(alpha, rel=1e-12) and be == pytest.approx(beta, rel=1e-12)
    model = AnalyticModel(al, be, 0.0, "ring")
    truth = cost("all_reduce", "ring", M, other_p, alpha, beta)
    np.testing.assert_allclose(model.times("all_reduce", M, other_p), truth, rtol=1e-12)
    # the least-squares route gives the same answer from sampled data
    al2, be2 = fit_link_parameters("all_reduce", "ring",
                                   [(fit_p, M, cost("all_reduce", "ring", M, fit_p, alpha, beta))])
    assert (al2, be2) == pytest.approx((alpha, beta), rel=1e-9)


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_fit_link_parameters_recovers_every_algorithm(alg: str) -> None:
    alpha, beta = 3e-6, 5e-11
    m = np.logspace(3, 9, 25)
    samples = [(p, m, cost("all_reduce", alg, m, p, alpha, beta)) for p in (8, 32)]
    al, be = fit_link_parameters("all_reduce", alg, samples)
    assert al == pytest.approx(alpha, rel=1e-3) and be == pytest.approx(beta, rel=1e-3)


def test_analytic_model_round_trip_and_validation() -> None:
    model = AnalyticModel(ALPHA, BETA, GAMMA, {"all_reduce": "dbt", "all_gather": "rd"},
                          chunk_bytes=65536)
    again = AnalyticModel.from_dict(model.to_dict())
    assert again.to_dict() == model.to_dict()
    np.testing.assert_array_equal(again.times("all_reduce", M, 48),
                                  model.times("all_reduce", M, 48))
    assert model.algorithms["broadcast"] == "best"
    with pytest.raises(ConfigError, match="does not implement"):
        AnalyticModel(ALPHA, BETA, 0.0, {"all_gather": "lp"})
    with pytest.raises(ConfigError, match="alpha"):
        AnalyticModel(-1.0, BETA)
    lp_everywhere = AnalyticModel(ALPHA, BETA, 0.0, "lp")
    assert lp_everywhere.algorithms["all_gather"] == "ring"  # documented fallback
