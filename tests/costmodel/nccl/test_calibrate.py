"""The calibration decides from the fitted multi-node sweep alone whether LL128 runs between
nodes (synthetic sweeps, labelled as such, then the two ABCI 2-node sweeps)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gradsched.costmodel.nccl.calibrate import Sweep, calibrate
from gradsched.costmodel.nccl.hardware import PRESETS
from gradsched.costmodel.nccl.tuning import LevelParams, nccl_default_params, select

A100 = PRESETS["abci-a100"]
EXT = Path(__file__).resolve().parents[3] / "traces" / "comm" / "external"


def _synthetic(net_ll128: bool) -> Sweep:
    # SYNTHETIC: NCCL's choice on 2 A100 nodes priced at 30 GB/s and NCCL's latencies + 5 us
    hw = replace(A100, net_ll128=net_ll128)
    base = nccl_default_params(hw)
    level = LevelParams(30e9, tuple(v + 5e-6 for v in base.inter.base_latency_s))
    params = replace(base, inter=level)
    m = 2.0 ** np.arange(2, 26)
    return Sweep("all_reduce", 16, 2, m, select(hw, params, "all_reduce", m, 16)[0])


@pytest.mark.parametrize("net_ll128", [True, False])
def test_the_fit_recovers_whether_ll128_ran_between_nodes(net_ll128: bool) -> None:
    hw, _, errors = calibrate(A100, _synthetic(net_ll128), None, 0.0)
    assert hw.net_ll128 is net_ll128
    assert errors["inter"] < 2.0


def _abci(kind: str, nodes: int, per_node: int) -> Sweep:
    import pandas as pd

    df = pd.read_csv(EXT / f"nccl-abci-inter-{kind}-{nodes}.csv")
    return Sweep("all_reduce", nodes * per_node, nodes, df["bytes"].to_numpy(float),
                 df["time_s"].to_numpy(float))


def test_abci_two_node_sweeps_decide_ll128_per_machine() -> None:
    # measured: the V100 2-node sweep jumps from 92 to 150 us between 256 and 512 KiB where
    # NCCL without LL128 switches from ring LL to ring Simple; the A100 one is closer with it
    v100, _, err_v = calibrate(PRESETS["abci-v100"], _abci("vnode", 2, 4), None, 0.0)
    a100, _, err_a = calibrate(A100, _abci("anode", 2, 8), None, 0.0)
    assert not v100.net_ll128 and a100.net_ll128
    assert err_v["inter"] < 14.0 and err_a["inter"] < 6.5


def test_the_protocol_efficiencies_stop_at_their_wire_format() -> None:
    # LL carries 8 data bytes in 16 (2.8.4 devcomm.h): at most half the bus bandwidth, 1.5
    # times NCCL's largest LL factor (1/3, ring on one node, not all-reduce); LL128 120 in
    # 128: 15/16 over NCCL's 0.92
    from gradsched.costmodel.nccl.calibrate import efficiency_bounds
    from gradsched.costmodel.nccl.hardware import PRESETS

    (ll_lo, ll_hi), (l128_lo, l128_hi) = efficiency_bounds(PRESETS["abci-v100"])
    assert ll_hi == pytest.approx(1.5) and l128_hi == pytest.approx(15 / 16 / 0.92)
    assert ll_lo == l128_lo == 0.05
    # current NCCL puts ring LL at half the bus bandwidth already
    assert efficiency_bounds(PRESETS["h100-8x400g"])[0][1] == pytest.approx(1.0)
