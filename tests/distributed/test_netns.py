"""The network-namespace preflight tells a non-root user clearly."""

from __future__ import annotations

import os

import pytest

from gradsched.distributed import netns
from gradsched.distributed.cluster import ClusterError


def test_non_root_is_told_clearly(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match="needs root"):
        netns.preflight()
