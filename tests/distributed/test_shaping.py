"""Rates in tc units, and their labels."""

from __future__ import annotations

import pytest

from gradsched.distributed.shaping import parse_rate, rate_label
from gradsched.errors import ConfigError


def test_rates_use_tc_units():
    assert parse_rate("1gbit") == 1e9
    assert parse_rate("100mbit") == 1e8
    assert parse_rate("125mbps") == 1e9  # bytes per second
    assert rate_label(1e9) == "1gbit" and rate_label(1e8) == "100mbit"
    with pytest.raises(ConfigError, match="rate"):
        parse_rate("fast")
