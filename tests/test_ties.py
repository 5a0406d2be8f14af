"""gradsched.ties: one relative tolerance for "the same iteration time", and the fixed-order
tie-break every pick of a fastest candidate uses."""

import math

import numpy as np
import pytest

from gradsched.ties import (
    RTOL,
    faster,
    fastest_label,
    first_min,
    same_time,
    tied_labels,
    tied_min,
    tied_ranks,
)

T = 0.30994  # seconds: the order of an iteration


def test_the_tolerance_sits_between_float_noise_and_a_nanosecond_per_second():
    assert 1e-12 < RTOL <= 1e-9


def test_one_ulp_apart_is_the_same_time_and_a_nanosecond_per_second_is_not():
    assert same_time(T, np.nextafter(T, 1.0))
    assert same_time(T, T * (1 + 0.5 * RTOL))
    assert not same_time(T, T * (1 + 2 * RTOL))
    assert not same_time(1.0, 1.0 + 2e-9)


def test_same_time_is_symmetric_and_handles_zero_nan_and_infinity():
    assert same_time(T * (1 + 0.9 * RTOL), T) == same_time(T, T * (1 + 0.9 * RTOL))
    assert same_time(0.0, 0.0)
    assert not same_time(0.0, 1e-300)
    assert not same_time(math.nan, math.nan)
    assert same_time(math.inf, math.inf)
    assert not same_time(T, math.inf)  # not |a - b| = inf <= rtol * inf


def test_faster_needs_more_than_the_tolerance():
    assert not faster(np.nextafter(T, 0.0), T)
    assert faster(T * (1 - 2 * RTOL), T)
    assert not faster(T, T * (1 - 2 * RTOL))


def test_the_tied_set_is_measured_from_the_minimum_and_kept_in_order():
    up = np.nextafter(T, 1.0)
    assert tied_min([1.0, up, 0.5, T]) == [1, 3]
    assert tied_min([math.nan, T, up]) == [1, 2]
    assert tied_min([]) == []
    assert tied_min([math.nan]) == []


def test_first_min_takes_the_first_in_the_given_order_not_the_smallest_float():
    down = np.nextafter(T, 0.0)
    assert first_min([T, down]) == 0
    assert first_min([down, T]) == 0
    with pytest.raises(ValueError, match="no candidate"):
        first_min([math.nan])


def test_labels_follow_the_mapping_order():
    scores = {"wfbp-dp": T, "ddp(bucket_cap_mb=25)": 0.4, "dear(search=bo)": np.nextafter(T, 0)}
    assert tied_labels(scores) == ["wfbp-dp", "dear(search=bo)"]
    assert fastest_label(scores) == "wfbp-dp"


def test_tied_values_share_a_rank():
    up = np.nextafter(T, 1.0)
    assert tied_ranks([0.5, T, up, 0.2]) == [4, 2, 2, 1]  # competition ranks, as pandas "min"
    assert tied_ranks([T, math.nan]) == [1, 2]


def test_a_tie_goes_to_the_smaller_secondary_cost_then_to_the_first() -> None:
    from gradsched.ties import fastest_label_by

    scores = {"wfbp": 1.0, "contig": 1.0 + 1e-13, "ddp": 1.1}
    assert fastest_label_by(scores, {"wfbp": 202, "contig": 29, "ddp": 8}) == "contig"
    assert fastest_label_by(scores, {"wfbp": 5, "contig": 5, "ddp": 1}) == "wfbp"


def test_a_plan_at_the_bound_has_no_gap() -> None:
    from gradsched.experiments.grid import gap_to_bound_pct

    bound = 19.5468015
    assert gap_to_bound_pct(bound * (1 + 4e-16), bound) == 0.0  # the order of a sum's terms
    assert gap_to_bound_pct(bound * 1.01, bound) == pytest.approx(1.0)
    assert gap_to_bound_pct(1.0, 0.0) == 0.0
