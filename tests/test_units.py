"""Sizes with binary suffixes (the grammar of every --*-bytes option)."""

from __future__ import annotations

import pytest

from gradsched.errors import ConfigError
from gradsched.units import parse_size


def test_parse_size_binary_suffixes():
    assert parse_size("4") == 4
    assert parse_size("64K") == 65536
    assert parse_size("256M") == 256 << 20
    assert parse_size("1GiB") == 1 << 30
    for bad in ("", "x", "-4", "1.5", "4T"):
        with pytest.raises(ConfigError, match="size"):
            parse_size(bad)
