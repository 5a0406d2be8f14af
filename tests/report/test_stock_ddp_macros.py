"""Macros of stock DDP with gradsched's per-bucket caps, on SYNTHETIC rows (arithmetic only,
never measurements)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from gradsched.reexec.stock_ddp import stock_ddp_comparison
from gradsched.report.stock_ddp import stock_ddp_macros
from tests.reexec.test_stock_ddp import TIMES, synthetic


def test_ranges_and_counts_use_the_intervals() -> None:
    slower = dict(TIMES, **{"ddp-list-contiguous_optimum": 1.20})  # loses to tuned 1.05
    frame, its = synthetic({"a-b2-p2-tbf1gbit": TIMES, "b-b2-p2-tbf1gbit": slower})
    out = stock_ddp_macros(stock_ddp_comparison(frame, its))
    assert out["StockDdpCases"] == "2" and out["StockDdpCommCases"] == "2"
    assert out["StockDdpMatchCases"] == "2"
    assert out["StockDdpListVsDefaultMax"] == "1.10"  # 1.10 / 1.00
    assert out["StockDdpListVsDefaultMin"] == "0.92"  # 1.10 / 1.20
    assert out["StockDdpListAimCases"] == "1"
    assert out["StockDdpListNotSlowerTunedCommCases"] == "1"
    assert out["StockDdpListFasterTunedCases"] == "1"  # 1.05 / 1.00, interval above 1


def test_without_list_items_every_macro_is_na() -> None:
    frame, its = synthetic({"a-b2-p2-tbf1gbit": {k: v for k, v in TIMES.items()
                                                   if not k.startswith("ddp-list")}})
    out = stock_ddp_macros(stock_ddp_comparison(frame, its))
    assert out["StockDdpCases"] == "n/a" and out["StockDdpListVsDefaultMin"] == "n/a"
